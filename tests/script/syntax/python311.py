# Every construct of Python 3.11's grammar, for tests/parse_stdlib.py: kiln's parser must read it and
# count its nodes as Python's ast does. It is parsed, never run.
"""Module docstring."""
from __future__ import annotations

import os, sys as system
import os.path as osp
from . import sibling
from .. import parent as p
from ...pkg.mod import (a, b as c,)
from typing import *

__all__ = ["f"]; x = 1; y: int; z: "Forward" = 2


@decorator
@decorator.attr(arg, key=value)
@(lambda f: f)
@x[0] if x else y
class Klass(Base, other.Base, *bases, metaclass=Meta, **kw):
    """Class docstring."""
    attr: int = 0
    match = case = _ = 1

    class Nested:
        pass

    @staticmethod
    def method(a, b=1, /, c=2, *args: int, d, e=3, **kwargs: str) -> list[int] | None:
        """Method docstring."""
        def inner(*, k): return k
        nonlocal_ = None
        return [a, *args]

    async def coroutine(self, *args: *Ts):
        async with a as b, c:
            pass
        async for i in aiter():
            await i
        result = [x async for x in y if await x]
        return await something


def generator(n):
    x = yield
    y = yield n
    yield from range(n)
    z = (yield n, n)
    lambda: (yield)


def scopes():
    global g, h
    v = 1

    def inner():
        nonlocal v
        del v, g[0], h.a
    return inner


strings = ('single' "double" '''triple
single''' """triple
double""" r'raw\n' R"RAW" u'unicode' U"UNI" '\x41\101\u00e9\N{EM DASH}')
bytes_ = b'a' b"b" rb'c' B"BYTES" rb'\d' Rb"\d" br'\d' BR"\d" b'\x00\n'
fstrings = [
    f'plain', F"upper", rf'raw {x}\n', fR"{x}", Rf'{x}', FR"{x}",
    f'{x!r:>10}', f'{x=}', f'{x = }', f'{x=!s:^{width}}', f'{x:{width}.{precision}}', f'{x:{"<"}{width:1}}',
    f'{{literal}} {x}{{', f'{"nested"!a}', f'{f"{x!r}"}', f'''{f"{f'{x}'}"}''', f"""{
        x
    }""", f'{x:}', f'{3.14:.2f}', f'{x,}', f'{x, y}', f'{(lambda: 1)()}',
    f'{ {"a": 1}["a"] }', f'{[i for i in x]}', f'{i for i in x}', f'{x if x else y}', f'{x!r}' 'tail' f'{y}',
    f'\{x}', f'\N{EM DASH}{x}', f'{x:\n}', f'{yield}' if 0 else 0,
]
numbers = [0, 00, 0_0, 1_000_000, 0x_FF, 0XdeadBEEF, 0o17, 0O7_7, 0b1010, 0B1_0, 99999999999999999999999,
           1.0, 1., .5, 1e10, 1E-10, 1.5e+3, 1_0.0_1e1_0, 1j, 1.5J, 1e3j, .5j, 0j, 1if x else 2]
comprehensions = (
    [x for x in y], [x for x in y if x if not x for z in x], {x for x in y}, {k: v for k, v in d.items()},
    (x for x in y), sum(x for x in y), [(x, y) for x in a for y in b], [[y for y in x] for x in z],
    {**a, 'k': 1, **b}, {*a, *b}, [*a, *b], (*a, *b), (*a,), [x for [a, *b] in c], [x for x, in y],
)
lambdas = [
    lambda: 0, lambda x: x, lambda x, y=1: x, lambda *a, **k: 0, lambda x, /, y, *, z: 0, lambda *, k=1: k,
    lambda x=lambda: 1: x, (lambda: 0)(),
]
a, *b = c = d, e = f
[a, (b, *c)] = x
*a, = x
a[1:2, ::3, ...] = a[*b] = a[1:2, *c] = a[()] = a[:, None]
x.y: int
x[0]: int = 1
(x): int = 1
x += 1; x -= 1; x *= 1; x /= 1; x //= 1; x %= 1; x **= 1; x @= 1; x &= 1; x |= 1; x ^= 1; x <<= 1; x >>= 1
ops = (a < b <= c == d != e > f >= g, a is b, a is not b, a in b, a not in b, not a, a and b or c and not d,
       -a, +a, ~a, a ** -b, -a ** b, a @ b, a // b % c, a << b >> c, a & b | c ^ d, a if b else c if d else e,
       await_ := 1, (y := 2), f(x := 3), [z := 4, z ** 2], ..., Ellipsis, None, True, False)
calls = f(a, *b, c=1, *d, **e, **g), f(*a), f(**k), f(x for x in y), f(a)(b)(c)[d].e.f()
if (n := len(a)) > 10: pass
elif n: pass
else: pass
while x: break
else: pass
for i in range(3): continue
else: pass
for x, *y in z: pass
for x in *a, *b: pass
try:
    pass
except ValueError:
    pass
except (TypeError, KeyError) as error:
    raise
except:
    raise ValueError("x") from error
else:
    pass
finally:
    pass
try:
    pass
finally:
    pass
try:
    pass
except* ValueError as group:
    pass
except* (TypeError, KeyError):
    pass
with open(a) as f, open(b) as g: pass
with (open(a) as f, open(b) as g,): pass
with (open(a), open(b)): pass
with (yield_ := a) as f: pass
with a as (b, c): pass
assert x
assert x, "message"
raise
match command.split():
    case [action]:
        pass
    case [action, obj] if obj:
        pass
    case Point(x=0, y=0) | Point(1, 2) as p:
        pass
    case {"key": value, **rest}:
        pass
    case {1: _, -2: _, "s": _, None: _, Color.RED: _}:
        pass
    case [1, 2, *others] | (3, *_) | (4,) | () | []:
        pass
    case -1 | 1.5 | 1 + 2j | -1 - 2j | "s" "t" | b"b" | None | True | False:
        pass
    case Color.RED | mod.Color.GREEN:
        pass
    case str() | int(real=0) | (a as b):
        pass
    case _:
        pass
match (x):
    case a, b:
        pass
match x, y:
    case (a, b), *c:
        pass
match = 1
match.attr = match(x)[match]
case = match * 2
print(match, case, _)
x = 1 \
    + 2
if __name__ == "__main__":
    print("main")
