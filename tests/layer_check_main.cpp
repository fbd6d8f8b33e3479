// Linked by meson with one layer's every object and the layers below it (see meson.build): it builds
// only if the layer calls nothing above it.
int main() { return 0; }
