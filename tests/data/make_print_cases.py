# Prints the doctest cases of tests/test_print.cpp: each tensor is built the same way in torch and in
# kiln, and the expected text is torch's repr. Run: /usr/bin/python3 tests/data/make_print_cases.py

import torch, math
nan, inf = float('nan'), float('inf')
cases = []
group = ''
def case(name, py, cpp):
    cases.append((group, name, py, cpp))

def T(vals, shape=None, dt='float32'):
    t = torch.tensor(vals, dtype=getattr(torch, dt))
    return t.reshape(shape) if shape is not None else t

def cvals(vals):
    out = []
    for v in vals:
        if isinstance(v, float) and math.isnan(v): out.append('NAN')
        elif v == inf: out.append('INFINITY')
        elif v == -inf: out.append('-INFINITY')
        else: out.append(repr(float(v)))
    return '{' + ', '.join(out) + '}'

DT = {'float32':'Float32','float64':'Float64','int32':'Int32','int64':'Int64','bool':'Bool','bfloat16':'BFloat16','float16':'Float16'}
def C(vals, shape=None, dt='float32'):
    s = '{' + ', '.join(map(str, shape)) + '}' if shape is not None else '{}'
    return f'tensor(std::vector<double>{cvals(vals)}, {s}, DType::{DT[dt]})'

def both(name, vals, shape=None, dt='float32', pyview='', cppview=''):
    case(name, eval('T(vals, shape, dt)' + pyview), C(vals, shape, dt) + cppview)

group = 'dtypes and their suffixes'
both('float64 row', [0.1, 2.0], [1, 2], 'float64')
both('int32', [1, 2, 3], None, 'int32')
both('int64', [1, -2, 300], None, 'int64')
both('integer-valued floats', [1., 2., 3.])
group = 'float notation: fixed, integer-valued, scientific, nan and inf'
both('fixed', [0.1, 2.0, -3.25])
both('small magnitude switches to sci', [1e-5, 1.0])
both('large ratio switches to sci', [0.5, 1234.5])
both('big integer floats use sci', [1e9, 1.0])
both('integer floats with ratio over 1000', [1., 2000.])
both('nan and inf', [1.5, nan, inf, -inf])
both('nan and inf with integers', [1., nan, inf])
both('all zeros', [0., 0.])
both('negative zero', [-0., 1.])
both('all nan', [nan, nan])
both('sci with nan', [1e-8, nan, 3.])
both('fixed rounding at the 4th decimal', [0.00015, 2.00005, 0.99995], None, 'float64')
both('negative sci', [-1e-5, 2.5, -300000.0])
both('huge float16 and bfloat16', [65504., -1.], None, 'float16')
both('bfloat16 rounding', [0.1, 1.0 / 3.0, 1000.1], None, 'bfloat16')
both('large integer float64 under 1e8', [99999999., 1000000.], None, 'float64')
both('only infinities', [inf, -inf])
case('int64 extremes', torch.tensor([-9223372036854775807, 9223372036854775807, 12]),
     'tensor(std::vector<int64_t>{-9223372036854775807, 9223372036854775807, 12})')
both('bool', [1, 0, 1], None, 'bool')
both('bool 2d', [1, 0, 0, 1], [2, 2], 'bool')
both('bfloat16', [1.5, 2.25, 3.0], None, 'bfloat16')
both('float16', [0.1, 0.2, -7.5], None, 'float16')
both('float16 integers', [1., 2.], None, 'float16')
both('large int64', [123456789012, -5], None, 'int64')
both('float64 sci', [1e10, 1e-10], None, 'float64')
group = 'alignment, nesting and line wrapping'
both('column alignment', [1.5, -20.25, 300.125, 4., 0.5, -6.], [2, 3])
both('3d', list(range(24)), [2, 3, 4], 'int64')
both('4d float', [i * 0.5 for i in range(16)], [2, 2, 2, 2])
both('wrap floats', [i * 1.5 for i in range(30)])
both('wrap ints', list(range(100)), None, 'int64')
both('wrap float64 with suffix', [i * 1.25 for i in range(17)], None, 'float64')
both('suffix on new line', [i * 11.25 for i in range(8)], None, 'float64')
both('wrap inside 2d', [i * 1.5 for i in range(40)], [2, 20])
group = 'summarisation past 1000 elements'
case('summarised 1d', torch.arange(2000), 'arange(2000)')
case('summarised 1d float', (torch.arange(1001, dtype=torch.float64) / 7).float(), '(arange(0, 1001, 1, DType::Float64) / 7).to(DType::Float32)')
case('summarised 2d', (torch.arange(2000, dtype=torch.float64) / 7).float().reshape(40, 50), '(arange(0, 2000, 1, DType::Float64) / 7).to(DType::Float32).reshape({40, 50})')
case('summarised 3d', torch.arange(1200, dtype=torch.int32).reshape(10, 12, 10), 'arange(0, 1200, 1, DType::Int32).reshape({10, 12, 10})')
case('summarised short dim kept', torch.arange(1010.).reshape(2, 505), 'arange(0, 1010, 1, DType::Float32).reshape({2, 505})')
case('summary decides format', torch.cat([torch.full([1], 1e-6), torch.full([500], 1.5), torch.full([500], 1e-6), torch.full([10], 2.5)]),
     'cat({full({1}, 1e-6), full({500}, 1.5), full({500}, 1e-6), full({10}, 2.5)})')
case('summarised transposed', torch.arange(2000).reshape(40, 50).t(), 'arange(2000).reshape({40, 50}).t()')
group = 'non-contiguous views are read through strides'
both('transposed view', list(range(12)), [3, 4], 'int64', '.t()', '.t()')
both('strided slice', [i * 0.25 for i in range(10)], None, 'float32', '[1::3]', '.slice(0, 1, std::nullopt, 3)')
both('permuted 3d', [i * 1.5 for i in range(24)], [2, 3, 4], 'float64', '.permute(2, 0, 1)', '.permute({2, 0, 1})')
both('expanded', [1., 2.], [2, 1], 'float32', '.expand(2, 3)', '.expand({2, 3})')
both('mixed values 4x5', [math.sin(i) * 10 ** (i % 3) for i in range(20)], [4, 5])
both('one element 2d', [7.], [1, 1], 'float64')
group = 'empty and 0-d tensors'
both('empty 1d float', [], [0])
both('empty 1d int64', [], [0], 'int64')
both('empty 2d', [], [0, 3])
both('empty 3d float64', [], [2, 0, 3], 'float64')
both('empty bool', [], [0, 2], 'bool')
case('0-d float', torch.tensor(3.5), 'scalar_tensor(3.5)')
case('0-d int', torch.tensor(3), 'scalar_tensor(3, DType::Int64)')
case('0-d int32', torch.tensor(-3, dtype=torch.int32), 'scalar_tensor(-3, DType::Int32)')
case('0-d bool', torch.tensor(True), 'scalar_tensor(true, DType::Bool)')
case('0-d float64', torch.tensor(1e-7, dtype=torch.float64), 'scalar_tensor(1e-7, DType::Float64)')
case('0-d nan', torch.tensor(nan), 'scalar_tensor(NAN)')
case('0-d integer float', torch.tensor(2.0), 'scalar_tensor(2.0)')
case('0-d bfloat16', torch.tensor(2.5, dtype=torch.bfloat16), 'scalar_tensor(2.5, DType::BFloat16)')

def cstr(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n"\n        "') + '"'
cur = None
for g, name, pt, cpp in cases:
    if g != cur:
        if cur is not None: print('}\n')
        print(f'TEST_CASE("print: {g}") {{')
        cur = g
    print(f'  {{  // {name}\n    Tensor t = {cpp};\n    CHECK(t.str() ==\n          {cstr(repr(pt))});\n  }}')
print('}')
