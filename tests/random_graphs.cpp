#include "random_graphs.h"

namespace kiln::test {

RandomGraph random_graph(std::mt19937& rng, DType dt) {
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  int64_t a = 1 + int64_t(pick(5)), b = 1 + int64_t(pick(6));
  const Shape shapes[] = {{a, b}, {b}, {a, 1}, {}};
  RandomGraph r;
  r.graph = std::make_shared<ir::Graph>();
  ir::Graph& g = *r.graph;
  std::vector<ir::Value*> pool;
  std::vector<Tensor> vals;  // each pool value on the inputs: types come from running, as a trace's do
  int nin = 1 + int(pick(3));
  for (int i = 0; i < nin; ++i) {
    Shape s = i == 0 ? Shape{a, b} : shapes[pick(4)];
    Tensor t = (randn(s) * 2.0).to(dt);
    pool.push_back(g.add_input(ir::type_of(dt, s)));
    vals.push_back(t);
    r.inputs.emplace_back(t);
  }
  const OpId unary[] = {OpId::Neg, OpId::Abs, OpId::Exp, OpId::Tanh, OpId::Sigmoid, OpId::Relu, OpId::Sin,
                        OpId::Cos, OpId::Gelu, OpId::Silu, OpId::Erf, OpId::Sqrt, OpId::Log, OpId::Reciprocal};
  const OpId binary[] = {OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Maximum, OpId::Minimum, OpId::Pow};  // Pow last
  auto add = [&](OpId op, std::vector<size_t> ins, Attrs attrs, ir::Value* constant = nullptr, Tensor cval = {}) {
    Tensors ts;
    std::vector<ir::Value*> vs;
    for (size_t i : ins) {
      ts.push_back(vals[i]);
      vs.push_back(pool[i]);
    }
    if (constant) {
      ts.push_back(cval);
      vs.push_back(constant);
    }
    Tensor out;
    try {
      out = dispatch1(op, ts, attrs);
    } catch (const Error&) {
      return;  // shapes that do not broadcast: skip the op
    }
    ir::Node* n = g.insert(g.create_op(op, vs, attrs));
    n->output()->set_type(ir::type_of(out.dtype(), out.sizes()));
    pool.push_back(n->output());
    vals.push_back(out);
  };
  int nops = 2 + int(pick(10));
  for (int k = 0; k < nops; ++k) {
    size_t x = pick(pool.size());
    switch (pick(10)) {
      case 0: case 1: case 2: case 3: add(unary[pick(std::size(unary))], {x}, {}); break;
      case 4: {
        Tensor c = Tensor::wrap_scalar(double(int(pick(5)) - 2) * 0.5);
        add(binary[pick(std::size(binary))], {x}, {}, g.insert_constant(c, true), c);
        break;
      }
      case 5: {  // a view of a 2-d value
        if (vals[x].dim() != 2) break;
        Shape s = vals[x].sizes();
        if (pick(2)) add(OpId::Permute, {x}, Attrs().set("dims", Shape{1, 0}));
        else add(OpId::Reshape, {x}, Attrs().set("shape", Shape{s[1], s[0]}));
        break;
      }
      // pow only with constant exponents: a negative base makes it discontinuous in the exponent, so an
      // approximate exponent within a few ulp could turn a number into NaN
      default: add(binary[pick(std::size(binary) - 1)], {x, pick(pool.size())}, {});
    }
  }
  size_t out = pool.size() - 1;
  if (pick(3) == 0) {
    Attrs ra;
    if (pick(2)) ra.set("dims", Shape{-1}).set("keepdim", bool(pick(2)));
    add(pick(2) ? OpId::Sum : OpId::Amax, {out}, ra);
    out = pool.size() - 1;
  }
  g.register_output(pool[out]);
  if (pool.size() > 3 && pick(2)) g.register_output(pool[pool.size() / 2]);
  return r;
}

}  // namespace kiln::test
