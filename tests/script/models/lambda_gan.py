"""A small DCGAN-style generator and discriminator written the way published GAN and VAE code keeps its
activations and norms: lambdas stored on self in __init__ (`self.act = lambda x: F.leaky_relu(x, 0.2)`, a norm
picked by a flag, `(lambda c: nn.BatchNorm2d(c)) if bn else nn.Identity`), an output activation looked up in a
dict of lambdas, a list of lambdas applied in turn in forward, and the init function that asks `type(m)` and
`m.__class__.__name__`."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif type(m) == nn.BatchNorm2d:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, nz=8, ngf=4, nc=3, bn=True, out="tanh"):
        super().__init__()
        norm = (lambda c: nn.BatchNorm2d(c)) if bn else nn.Identity
        self.act = lambda x: F.leaky_relu(x, 0.2)
        outs = {"tanh": lambda x: torch.tanh(x), "hard": lambda x: x.clamp(-1.0, 1.0)}
        self.out = outs[out]
        self.up1 = nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False)
        self.n1 = norm(ngf * 2)
        self.up2 = nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False)
        self.apply(weights_init)

    def forward(self, z):
        h = self.act(self.n1(self.up1(z)))
        return self.out(self.up2(h))


class Discriminator(nn.Module):
    def __init__(self, nc=3, ndf=4, bn=True, slope=0.2, score="prob"):
        super().__init__()
        norm = (lambda c: nn.BatchNorm2d(c)) if bn else nn.Identity
        self.post = [lambda x: F.leaky_relu(x, slope), lambda x: x * 0.5]
        self.scores = {"prob": lambda x: torch.sigmoid(x), "logit": lambda x: x}
        self.score = score
        self.conv1 = nn.Conv2d(nc, ndf, 4, 2, 1)
        self.conv2 = nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False)
        self.n2 = norm(ndf * 2)
        self.head = nn.Conv2d(ndf * 2, 1, 2)
        self.apply(weights_init)

    def forward(self, x):
        x = self.conv1(x)
        for f in self.post:
            x = f(x)
        x = self.post[0](self.n2(self.conv2(x)))
        return self.scores[self.score](self.head(x)).view(-1)
