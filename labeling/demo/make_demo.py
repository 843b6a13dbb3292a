"""Regenerate the demo problems and solutions: `python labeling/demo/make_demo.py`.

Each template writes a problem, its ground truth, a correct solution, a solution that
applies a typical misconception and ends on a wrong answer, and (for some) one that makes
a wrong step yet still reaches the right answer. Answers are computed, not typed.

Over 500 lines because it is data: one short template per kind of problem, read one at a time; the app
never imports it (labeling/demo/seed.py loads the files it writes).
"""

import json
import math
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).parent
A = "# Answer\n\n"


def frac(f: Fraction) -> str:
    if f.denominator == 1:
        return str(f.numerator)
    sign = "-" if f < 0 else ""
    return f"{sign}\\frac{{{abs(f.numerator)}}}{{{f.denominator}}}"


def sol(steps, ratings, kind, alternatives=None):
    # `alternatives`: other completions of the -1 step, rated in the workbench (PRM800K
    # phase 2) before the label ends.
    out = {"steps": steps, "ratings": ratings, "kind": kind}
    if alternatives:
        out["alternatives"] = {str(ratings.index(-1)): alternatives}
    return out


def percent_of(p, n):
    ans = Fraction(p * n, 100)
    wrong = Fraction(p * n, 10)
    return dict(
        subject="Prealgebra",
        level=1,
        problem=f"What is ${p}\\%$ of ${n}$?",
        solution=f"${p}\\%$ of ${n}$ is $\\frac{{{p}}}{{100}}\\cdot {n} = \\boxed{{{frac(ans)}}}$.",
        answer=frac(ans),
        sols=[
            sol(
                [
                    f"${p}\\%$ means $\\frac{{{p}}}{{100}}$.",
                    f"So we compute $\\frac{{{p}}}{{100}} \\cdot {n} = {frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"We want ${p}\\%$ of ${n}$.",
                    f"${p}\\%$ is $\\frac{{{p}}}{{10}}$.",
                    f"So the answer is $\\frac{{{p}}}{{10}}\\cdot {n} = {frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [0, -1],
                "wrong_answer",
                [
                    f"${p}\\%$ is $\\frac{{{p}}}{{100}}$.",
                    f"${p}\\%$ is ${p}$ hundredths, which is $\\frac{{{p}}}{{1000}}$.",
                ],
            ),
            sol(
                [
                    f"Ten percent of ${n}$ is ${frac(Fraction(n, 10))}$.",
                    f"So ${p}\\%$ is ${p // 10 if p % 10 == 0 else Fraction(p, 10)}$ times that, which is ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def fraction_sum(a, b, c, d):
    ans = Fraction(a, b) + Fraction(c, d)
    wrong = Fraction(a + c, b + d)
    return dict(
        subject="Prealgebra",
        level=2,
        problem=f"Compute $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{d}}}$. Express your answer as a common fraction.",
        solution=f"With a common denominator, the sum is $\\boxed{{{frac(ans)}}}$.",
        answer=frac(ans),
        sols=[
            sol(
                [
                    f"The least common denominator of ${b}$ and ${d}$ is ${math.lcm(b, d)}$.",
                    f"So the sum is ${frac(ans)}$ after simplifying.",
                    A + frac(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"Add the numerators and add the denominators: $\\frac{{{a}+{c}}}{{{b}+{d}}}$.",
                    f"That is ${frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"Add the numerators and add the denominators: $\\frac{{{a}+{c}}}{{{b}+{d}}}$.",
                    f"Hmm, with a common denominator of ${b * d}$ the sum is $\\frac{{{a * d + c * b}}}{{{b * d}}} = {frac(ans)}$.",
                    A + frac(ans),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def linear(a, b, c):
    x = Fraction(c - b, a)
    wrong = Fraction(c + b, a)
    return dict(
        subject="Algebra",
        level=1,
        problem=f"Solve for $x$: ${a}x + {b} = {c}$.",
        solution=f"Subtract ${b}$ and divide by ${a}$: $x = \\boxed{{{frac(x)}}}$.",
        answer=frac(x),
        sols=[
            sol(
                [
                    f"Subtract ${b}$ from both sides: ${a}x = {c - b}$.",
                    f"Divide by ${a}$: $x = {frac(x)}$.",
                    A + frac(x),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"Move ${b}$ to the right side: ${a}x = {c + b}$.",
                    f"So $x = {frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "We need to isolate $x$.",
                    f"Subtracting ${b}$ gives ${a}x = {c - b}$, so $x = {frac(x)}$.",
                    A + frac(x),
                ],
                [0, 1, 1],
                "correct",
            ),
        ],
    )


def two_numbers(s, d):
    big = (s + d) // 2
    return dict(
        subject="Algebra",
        level=2,
        problem=f"The sum of two numbers is ${s}$ and their difference is ${d}$. What is the larger number?",
        solution=f"Adding the equations, $2a = {s + d}$, so $a = \\boxed{{{big}}}$.",
        answer=str(big),
        sols=[
            sol(
                [
                    "Let the numbers be $a > b$.",
                    f"Then $a + b = {s}$ and $a - b = {d}$.",
                    f"Adding the equations gives $2a = {s + d}$.",
                    f"So $a = {big}$.",
                    A + str(big),
                ],
                [0, 1, 1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "Let the numbers be $a > b$.",
                    f"Then $a + b = {s}$ and $a - b = {d}$.",
                    f"Subtracting the equations gives $2a = {s - d}$.",
                    f"So $a = {(s - d) // 2}$.",
                    A + str((s - d) // 2),
                ],
                [0, 1, -1],
                "wrong_answer",
            ),
            sol(
                [
                    f"Guess: the numbers are ${big}$ and ${s - big}$ because that is what always works.",
                    f"Check: ${big} + {s - big} = {s}$ and ${big} - {s - big} = {d}$.",
                    A + str(big),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def slope(x1, y1, x2, y2):
    m = Fraction(y2 - y1, x2 - x1)
    wrong = Fraction(x2 - x1, y2 - y1)
    return dict(
        subject="Algebra",
        level=2,
        problem=f"What is the slope of the line through $({x1},{y1})$ and $({x2},{y2})$?",
        solution=f"The slope is $\\frac{{{y2}-{y1}}}{{{x2}-{x1}}} = \\boxed{{{frac(m)}}}$.",
        answer=frac(m),
        sols=[
            sol(
                [
                    "The slope is rise over run, $\\frac{y_2-y_1}{x_2-x_1}$.",
                    f"That is $\\frac{{{y2 - y1}}}{{{x2 - x1}}} = {frac(m)}$.",
                    A + frac(m),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "The slope is $\\frac{x_2-x_1}{y_2-y_1}$.",
                    f"That is $\\frac{{{x2 - x1}}}{{{y2 - y1}}} = {frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "Going from the first point to the second,",
                    f"$y$ changes by ${y2 - y1}$ and $x$ by ${x2 - x1}$.",
                    f"So the slope is ${frac(m)}$.",
                    A + frac(m),
                ],
                [0, 1, 1, 1],
                "correct",
            ),
        ],
    )


def divisors(n):
    f, k, p = {}, n, 2
    while k > 1:
        while k % p == 0:
            f[p] = f.get(p, 0) + 1
            k //= p
        p += 1
    count = math.prod(e + 1 for e in f.values())
    wrong = math.prod(f.values())
    fact = " \\cdot ".join(f"{p}^{e}" if e > 1 else str(p) for p, e in f.items())
    ds = [d for d in range(1, n + 1) if n % d == 0]
    return dict(
        subject="Number Theory",
        level=2,
        problem=f"How many positive divisors does ${n}$ have?",
        solution=f"Since ${n} = {fact}$, it has $\\boxed{{{count}}}$ divisors.",
        answer=str(count),
        sols=[
            sol(
                [
                    f"Factor: ${n} = {fact}$.",
                    "Add one to each exponent and multiply.",
                    f"We get ${count}$.",
                    A + str(count),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"Factor: ${n} = {fact}$.",
                    "The number of divisors is the product of the exponents.",
                    f"We get ${wrong}$.",
                    A + str(wrong),
                ],
                [1, -1],
                "wrong_answer",
            ),
            sol(
                [
                    f"List them: {', '.join(map(str, ds))}.",
                    f"There are ${count}$ of them.",
                    A + str(count),
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def remainder(a, n, m):
    ans = pow(a, n, m)
    wrong = (a * n) % m
    return dict(
        subject="Number Theory",
        level=4,
        problem=f"What is the remainder when ${a}^{{{n}}}$ is divided by ${m}$?",
        solution=f"Working modulo ${m}$, ${a}^{{{n}}} \\equiv \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    f"We compute powers of ${a}$ modulo ${m}$.",
                    f"Repeated squaring gives ${a}^{{{n}}} \\equiv {ans} \\pmod{{{m}}}$.",
                    A + str(ans),
                ],
                [0, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"${a}^{{{n}}} \\equiv {a}\\cdot {n} \\pmod{{{m}}}$.",
                    f"That is ${wrong}$.",
                    A + str(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"By Fermat, ${a}^{{{m}}} \\equiv 1 \\pmod{{{m}}}$ for every $a$.",
                    f"Computing directly anyway, ${a}^{{{n}}} \\equiv {ans} \\pmod{{{m}}}$.",
                    A + str(ans),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def gcd_lcm(a, b):
    g, lcm = math.gcd(a, b), math.lcm(a, b)
    return dict(
        subject="Number Theory",
        level=1,
        problem=f"What is the least common multiple of ${a}$ and ${b}$?",
        solution=f"$\\operatorname{{lcm}}({a},{b}) = \\frac{{{a}\\cdot {b}}}{{{g}}} = \\boxed{{{lcm}}}$.",
        answer=str(lcm),
        sols=[
            sol(
                [
                    f"$\\gcd({a},{b}) = {g}$.",
                    f"So the lcm is $\\frac{{{a}\\cdot{b}}}{{{g}}} = {lcm}$.",
                    A + str(lcm),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "The lcm of two numbers is their product.",
                    f"So it is ${a * b}$.",
                    A + str(a * b),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"Multiples of ${max(a, b)}$: "
                    + ", ".join(str(max(a, b) * k) for k in range(1, lcm // max(a, b) + 1))
                    + ".",
                    f"The first that ${min(a, b)}$ divides is ${lcm}$.",
                    A + str(lcm),
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def choose(n, k):
    ans = math.comb(n, k)
    wrong = math.perm(n, k)
    return dict(
        subject="Counting & Probability",
        level=2,
        problem=f"In how many ways can a committee of ${k}$ be chosen from ${n}$ people?",
        solution=f"Order does not matter: $\\binom{{{n}}}{{{k}}} = \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    "The order of the members does not matter.",
                    f"So the count is $\\binom{{{n}}}{{{k}}} = {ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"There are ${n}$ choices for the first member, ${n - 1}$ for the second, and so on.",
                    f"So there are ${wrong}$ committees.",
                    A + str(wrong),
                ],
                [1, -1],
                "wrong_answer",
            ),
            sol(
                [
                    f"Ordered choices: ${wrong}$.",
                    f"Each committee is counted ${math.factorial(k)}$ times, so there are ${ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def dice(total):
    ways = sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == total)
    ans = Fraction(ways, 36)
    wrong = Fraction(ways, 11)
    return dict(
        subject="Counting & Probability",
        level=2,
        problem=f"Two fair six-sided dice are rolled. What is the probability that the sum is ${total}$? Express your answer as a common fraction.",
        solution=f"There are ${ways}$ favourable outcomes of $36$, so $\\boxed{{{frac(ans)}}}$.",
        answer=frac(ans),
        sols=[
            sol(
                [
                    "There are $36$ equally likely outcomes.",
                    f"${ways}$ of them have sum ${total}$.",
                    f"The probability is ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "The possible sums are $2$ through $12$, which is $11$ sums.",
                    f"${ways}$ pairs give a sum of ${total}$, so the probability is ${frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [1, -1],
                "wrong_answer",
            ),
            sol(
                [
                    "Each sum from $2$ to $12$ is equally likely.",
                    f"Counting ordered pairs instead, ${ways}$ of $36$ work, so ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def arrangements(word):
    from collections import Counter

    c = Counter(word)
    ans = math.factorial(len(word)) // math.prod(math.factorial(v) for v in c.values())
    wrong = math.factorial(len(word))
    return dict(
        subject="Counting & Probability",
        level=4,
        problem=f"How many distinct arrangements of the letters in the word {word} are there?",
        solution=f"Divide ${len(word)}!$ by the repeats: $\\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    f"There are ${len(word)}$ letters.",
                    "Repeated letters: "
                    + ", ".join(f"{letter} appears {v} times" for letter, v in c.items() if v > 1)
                    + ".",
                    f"So there are $\\frac{{{len(word)}!}}{{\\text{{repeats}}}} = {ans}$ arrangements.",
                    A + str(ans),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"There are ${len(word)}$ letters, so ${len(word)}! = {wrong}$ arrangements.",
                    A + str(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"The word has ${len(word)}$ letters.",
                    f"Accounting for repeated letters, the count is ${ans}$.",
                    A + str(ans),
                ],
                [0, 1, 1],
                "correct",
            ),
        ],
    )


def coins(n, k):
    ans = Fraction(math.comb(n, k), 2**n)
    wrong = Fraction(k, n)
    return dict(
        subject="Counting & Probability",
        level=5,
        problem=f"A fair coin is flipped ${n}$ times. What is the probability of exactly ${k}$ heads? Express your answer as a common fraction.",
        solution=f"$\\binom{{{n}}}{{{k}}}/2^{{{n}}} = \\boxed{{{frac(ans)}}}$.",
        answer=frac(ans),
        sols=[
            sol(
                [
                    f"There are $2^{{{n}}} = {2**n}$ outcomes.",
                    f"$\\binom{{{n}}}{{{k}}} = {math.comb(n, k)}$ have exactly ${k}$ heads.",
                    f"So the probability is ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"Each flip is heads half the time, so the chance of ${k}$ heads out of ${n}$ is $\\frac{{{k}}}{{{n}}}$.",
                    A + frac(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"There are ${2**n}$ sequences of flips.",
                    f"Of these, ${math.comb(n, k)}$ have ${k}$ heads.",
                    f"The answer is ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
        ],
    )


def triangle_area(b, h):
    ans = Fraction(b * h, 2)
    return dict(
        subject="Geometry",
        level=1,
        problem=f"A triangle has base ${b}$ cm and height ${h}$ cm. What is its area, in square centimeters?",
        solution=f"Area $= \\frac12 \\cdot {b} \\cdot {h} = \\boxed{{{frac(ans)}}}$.",
        answer=frac(ans),
        sols=[
            sol(
                [
                    "The area of a triangle is $\\frac12 bh$.",
                    f"So it is $\\frac12\\cdot {b}\\cdot {h} = {frac(ans)}$.",
                    A + frac(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                ["The area of a triangle is $bh$.", f"So it is ${b * h}$.", A + str(b * h)],
                [-1],
                "wrong_answer",
                [
                    "The area of a triangle is half the base times the height.",
                    "The area of a triangle is $b + h$.",
                    "Let me draw the triangle first.",
                ],
            ),
            sol(
                [
                    "The area of a triangle is $bh$.",
                    f"Half of ${b}\\cdot {h}$ is ${frac(ans)}$.",
                    A + frac(ans),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def hypotenuse(a, b):
    c2 = a * a + b * b
    r = math.isqrt(c2)
    ans = str(r) if r * r == c2 else sqrt_text(c2)
    wrong = str(a + b)
    return dict(
        subject="Geometry",
        level=3,
        problem=f"A right triangle has legs ${a}$ and ${b}$. How long is its hypotenuse? Express your answer in simplest radical form if needed.",
        solution=f"$c = \\sqrt{{{a}^2+{b}^2}} = \\boxed{{{ans}}}$.",
        answer=ans,
        sols=[
            sol(
                [
                    "By the Pythagorean theorem $c^2 = a^2 + b^2$.",
                    f"So $c^2 = {a * a} + {b * b} = {c2}$.",
                    f"Hence $c = {ans}$.",
                    A + ans,
                ],
                [1, 1, 1, 1],
                "correct",
            ),
            sol(
                ["The hypotenuse is the sum of the legs.", f"So it is ${wrong}$.", A + wrong],
                [-1],
                "wrong_answer",
            ),
            sol(
                [f"$c^2 = {a}^2 + {b}^2$.", f"That is ${c2}$, so $c = {ans}$.", A + ans],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def sqrt_text(n):
    out, inside = 1, n
    for k in range(2, math.isqrt(n) + 1):
        while inside % (k * k) == 0:
            inside //= k * k
            out *= k
    return f"{out if out > 1 else ''}\\sqrt{{{inside}}}"


def circle_area(r):
    return dict(
        subject="Geometry",
        level=1,
        problem=f"A circle has diameter ${2 * r}$. What is its area? Express your answer in terms of $\\pi$.",
        solution=f"The radius is ${r}$, so the area is $\\boxed{{{r * r}\\pi}}$.",
        answer=f"{r * r}\\pi",
        sols=[
            sol(
                [
                    f"The radius is half the diameter, ${r}$.",
                    f"The area is $\\pi r^2 = {r * r}\\pi$.",
                    A + f"{r * r}\\pi",
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"The area is $\\pi d^2$ with $d = {2 * r}$.",
                    f"So it is ${4 * r * r}\\pi$.",
                    A + f"{4 * r * r}\\pi",
                ],
                [-1],
                "wrong_answer",
                [
                    f"The area is $\\pi r^2$ with $r = \\frac{{{2 * r}}}{{2}} = {r}$.",
                    f"The area is $2\\pi r$ with $r = {r}$.",
                ],
            ),
            sol(
                [
                    "We need the area of a circle.",
                    f"With radius ${r}$, that is ${r * r}\\pi$.",
                    A + f"{r * r}\\pi",
                ],
                [0, 1, 1],
                "correct",
            ),
        ],
    )


def polygon_angles(n):
    ans = (n - 2) * 180
    return dict(
        subject="Geometry",
        level=2,
        problem=f"What is the sum of the interior angles of a convex polygon with ${n}$ sides, in degrees?",
        solution=f"$({n}-2)\\cdot 180^\\circ = \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    f"A convex ${n}$-gon splits into ${n - 2}$ triangles from one vertex.",
                    f"So the sum is ${n - 2}\\cdot 180 = {ans}$ degrees.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"A ${n}$-gon splits into ${n}$ triangles.",
                    f"So the sum is ${n * 180}$.",
                    A + str(n * 180),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "The exterior angles sum to $360^\\circ$.",
                    f"Interior plus exterior at each vertex is $180^\\circ$, so the sum is ${n}\\cdot 180 - 360 = {ans}$.",
                    A + f"{ans}^\\circ",
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def root_sum(a, b, c):
    s = Fraction(-b, a)
    wrong = Fraction(b, a)
    return dict(
        subject="Intermediate Algebra",
        level=3,
        problem=f"What is the sum of the roots of ${a}x^2 {b:+d}x {c:+d} = 0$?",
        solution=f"By Vieta, the sum is $-\\frac{{b}}{{a}} = \\boxed{{{frac(s)}}}$.",
        answer=frac(s),
        sols=[
            sol(
                [
                    "By Vieta's formulas the sum of the roots is $-\\frac{b}{a}$.",
                    f"Here that is ${frac(s)}$.",
                    A + frac(s),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "By Vieta's formulas the sum of the roots is $\\frac{b}{a}$.",
                    f"Here that is ${frac(wrong)}$.",
                    A + frac(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "By Vieta's formulas the sum of the roots is $\\frac{c}{a}$.",
                    f"Rather, it is $-\\frac{{b}}{{a}} = {frac(s)}$.",
                    A + frac(s),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def series(first, diff, n):
    last = first + (n - 1) * diff
    ans = n * (first + last) // 2
    return dict(
        subject="Intermediate Algebra",
        level=3,
        problem=f"Find the sum of the first ${n}$ terms of the arithmetic sequence ${first}, {first + diff}, {first + 2 * diff}, \\ldots$.",
        solution=f"The last term is ${last}$, so the sum is $\\frac{{{n}({first}+{last})}}{{2}} = \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    f"The ${n}$th term is ${first} + {n - 1}\\cdot {diff} = {last}$.",
                    f"The sum is $\\frac{{{n}}}{{2}}({first} + {last}) = {ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"The ${n}$th term is ${first} + {n}\\cdot {diff} = {first + n * diff}$.",
                    f"The sum is $\\frac{{{n}}}{{2}}({first} + {first + n * diff}) = {n * (2 * first + n * diff) // 2 if n * (2 * first + n * diff) % 2 == 0 else Fraction(n * (2 * first + n * diff), 2)}$.",
                    A + str(frac(Fraction(n * (2 * first + n * diff), 2))),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "Pair the first and last terms, the second and second-to-last, and so on.",
                    f"Each pair sums to ${first + last}$ and there are $\\frac{{{n}}}{{2}}$ pairs, giving ${ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def abs_interval(a, b):
    lo, hi = a - b, a + b
    ans = f"({lo},{hi})"
    return dict(
        subject="Intermediate Algebra",
        level=4,
        problem=f"Solve $|x - {a}| < {b}$. Express your answer in interval notation.",
        solution=f"$-{b} < x - {a} < {b}$, so $x \\in \\boxed{{({lo},{hi})}}$.",
        answer=ans,
        sols=[
            sol(
                [
                    f"The inequality means $-{b} < x - {a} < {b}$.",
                    f"Adding ${a}$: ${lo} < x < {hi}$.",
                    A + ans,
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"The inequality means $-{b} \\le x - {a} \\le {b}$.",
                    f"So $x \\in [{lo},{hi}]$.",
                    A + f"[{lo},{hi}]",
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"The distance from $x$ to ${a}$ is less than ${b}$.",
                    f"So $x$ is strictly between ${lo}$ and ${hi}$.",
                    A + ans,
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def poly_eval(a, b, c, x):
    ans = a * x * x + b * x + c
    wrong = a * 2 * x + b * x + c
    return dict(
        subject="Intermediate Algebra",
        level=1,
        problem=f"If $p(x) = {a}x^2 {b:+d}x {c:+d}$, what is $p({x})$?",
        solution=f"$p({x}) = {a}\\cdot {x * x} {b * x:+d} {c:+d} = \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    f"Substitute $x={x}$: ${a}({x})^2 {b:+d}({x}) {c:+d}$.",
                    f"That is ${a * x * x} {b * x:+d} {c:+d} = {ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"$({x})^2 = {2 * x}$.",
                    f"So $p({x}) = {a * 2 * x} {b * x:+d} {c:+d} = {wrong}$.",
                    A + str(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"We evaluate the polynomial at ${x}$.",
                    f"$x^2 = {x * x}$, so $p({x}) = {ans}$.",
                    A + str(ans),
                ],
                [0, 1, 1],
                "correct",
            ),
        ],
    )


SPECIAL = {
    30: ("\\frac{1}{2}", "\\frac{\\sqrt{3}}{2}"),
    45: ("\\frac{\\sqrt{2}}{2}", "\\frac{\\sqrt{2}}{2}"),
    60: ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}"),
}


def sine(deg):
    s, c = SPECIAL[deg]
    wrong = c if s != c else "1"
    return dict(
        subject="Precalculus",
        level=1,
        problem=f"Compute $\\sin {deg}^\\circ$.",
        solution=f"From the special right triangle, $\\sin {deg}^\\circ = \\boxed{{{s}}}$.",
        answer=s,
        sols=[
            sol(
                [
                    f"Use the special right triangle with a ${deg}^\\circ$ angle.",
                    f"The opposite side over the hypotenuse is ${s}$.",
                    A + s,
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    f"$\\sin {deg}^\\circ$ is the adjacent side over the hypotenuse.",
                    f"That is ${wrong}$.",
                    A + wrong,
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    f"$\\sin {deg}^\\circ = \\cos {90 - deg}^\\circ$.",
                    f"And $\\cos {90 - deg}^\\circ = {s}$.",
                    A + s,
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def radians(deg):
    f = Fraction(deg, 180)
    ans = (
        f"\\frac{{{f.numerator if f.numerator != 1 else ''}\\pi}}{{{f.denominator}}}"
        if f.denominator > 1
        else f"{f.numerator}\\pi"
    )
    wrong = f"\\frac{{{deg}\\pi}}{{360}}"
    return dict(
        subject="Precalculus",
        level=1,
        problem=f"Convert ${deg}^\\circ$ to radians.",
        solution=f"Multiply by $\\frac{{\\pi}}{{180}}$: $\\boxed{{{ans}}}$.",
        answer=ans,
        sols=[
            sol(
                [
                    "To convert degrees to radians, multiply by $\\frac{\\pi}{180}$.",
                    f"${deg}\\cdot\\frac{{\\pi}}{{180}} = {ans}$.",
                    A + ans,
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "To convert degrees to radians, multiply by $\\frac{\\pi}{360}$.",
                    f"So we get ${wrong}$.",
                    A + wrong,
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "A full turn is $2\\pi$ radians or $360^\\circ$.",
                    f"So ${deg}^\\circ$ is $\\frac{{{deg}}}{{360}}\\cdot 2\\pi = {ans}$.",
                    A + ans,
                ],
                [1, 1, 1],
                "correct",
            ),
        ],
    )


def dot(u, v):
    ans = u[0] * v[0] + u[1] * v[1] + u[2] * v[2]
    wrong = u[0] * v[0] + u[1] * v[1] - u[2] * v[2]
    vec = lambda w: "\\begin{pmatrix} " + " \\\\ ".join(map(str, w)) + " \\end{pmatrix}"  # noqa: E731
    return dict(
        subject="Precalculus",
        level=3,
        problem=f"Compute ${vec(u)} \\cdot {vec(v)}$.",
        solution=f"Multiply componentwise and add: $\\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    "The dot product is the sum of the componentwise products.",
                    f"${u[0]}\\cdot{v[0]} + {u[1]}\\cdot{v[1]} + {u[2]}\\cdot{v[2]} = {ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "In three dimensions the last product is subtracted.",
                    f"${u[0] * v[0]} + {u[1] * v[1]} - {u[2] * v[2]} = {wrong}$.",
                    A + str(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "In three dimensions the last product is subtracted.",
                    f"No: all products are added, ${u[0] * v[0]} + {u[1] * v[1]} + {u[2] * v[2]} = {ans}$.",
                    A + str(ans),
                ],
                [-1],
                "wrong_step_right_answer",
            ),
        ],
    )


def det(a, b, c, d):
    ans = a * d - b * c
    wrong = a * d + b * c
    return dict(
        subject="Precalculus",
        level=3,
        problem=f"Compute $\\det \\begin{{pmatrix}} {a} & {b} \\\\ {c} & {d} \\end{{pmatrix}}$.",
        solution=f"$ad - bc = {a * d} - {b * c} = \\boxed{{{ans}}}$.",
        answer=str(ans),
        sols=[
            sol(
                [
                    "For a $2\\times 2$ matrix the determinant is $ad - bc$.",
                    f"${a}\\cdot {d} - {b}\\cdot {c} = {ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1],
                "correct",
            ),
            sol(
                [
                    "For a $2\\times 2$ matrix the determinant is $ad + bc$.",
                    f"${a * d} + {b * c} = {wrong}$.",
                    A + str(wrong),
                ],
                [-1],
                "wrong_answer",
            ),
            sol(
                [
                    "We use the formula $ad - bc$.",
                    f"$ad = {a * d}$ and $bc = {b * c}$.",
                    f"So the determinant is ${ans}$.",
                    A + str(ans),
                ],
                [1, 1, 1, 1],
                "correct",
            ),
        ],
    )


PROBLEMS = [
    percent_of(15, 80),
    percent_of(40, 65),
    percent_of(25, 248),
    fraction_sum(2, 3, 1, 4),
    fraction_sum(3, 5, 1, 6),
    linear(3, 7, 25),
    linear(5, 4, 21),
    linear(4, 9, 1),
    two_numbers(22, 4),
    two_numbers(50, 12),
    slope(1, 2, 4, 11),
    slope(-2, 3, 4, 1),
    divisors(36),
    divisors(60),
    divisors(84),
    remainder(3, 10, 7),
    remainder(2, 20, 11),
    gcd_lcm(12, 18),
    gcd_lcm(8, 14),
    choose(8, 3),
    choose(10, 4),
    dice(7),
    dice(9),
    arrangements("LEVEL"),
    arrangements("BANANA"),
    coins(5, 2),
    coins(6, 3),
    triangle_area(9, 7),
    triangle_area(12, 5),
    hypotenuse(5, 12),
    hypotenuse(4, 6),
    circle_area(7),
    polygon_angles(7),
    polygon_angles(10),
    root_sum(2, -7, 3),
    root_sum(3, 5, -2),
    series(3, 4, 20),
    series(7, 5, 12),
    abs_interval(4, 3),
    abs_interval(-2, 5),
    poly_eval(2, -3, 5, 4),
    poly_eval(1, 4, -6, -3),
    sine(30),
    sine(60),
    radians(150),
    radians(225),
    dot((1, -2, 3), (4, 0, -1)),
    dot((2, 5, -1), (3, -1, 4)),
    det(3, 5, 2, 7),
    det(-4, 2, 6, 1),
]

# More instances of the same templates: enough labeled solutions (`seed.seed_demo_labels`)
# for a first training run with held-out problems on both sides of every metric.
PROBLEMS += [
    percent_of(20, 45),
    percent_of(35, 60),
    percent_of(12, 75),
    fraction_sum(1, 2, 1, 3),
    fraction_sum(2, 5, 1, 3),
    fraction_sum(3, 4, 1, 6),
    linear(2, 5, 17),
    linear(6, 1, 43),
    linear(7, 3, 31),
    two_numbers(30, 8),
    two_numbers(40, 14),
    slope(0, 1, 3, 7),
    slope(2, -1, 6, 7),
    divisors(48),
    divisors(72),
    divisors(90),
    remainder(3, 7, 5),
    remainder(7, 9, 10),
    gcd_lcm(20, 30),
    gcd_lcm(9, 15),
    choose(7, 2),
    choose(9, 3),
    dice(4),
    dice(6),
    dice(10),
    arrangements("PEPPER"),
    arrangements("ALABAMA"),
    coins(4, 2),
    coins(7, 3),
    triangle_area(10, 7),
    triangle_area(15, 4),
    hypotenuse(8, 15),
    hypotenuse(3, 7),
    circle_area(5),
    circle_area(9),
    polygon_angles(8),
    polygon_angles(12),
    root_sum(1, -5, 6),
    root_sum(2, 3, -9),
    series(2, 3, 15),
    series(5, 2, 25),
    abs_interval(6, 2),
    abs_interval(-3, 4),
    poly_eval(3, -2, 1, 3),
    poly_eval(2, 5, -3, -2),
    sine(45),
    radians(120),
    radians(300),
    dot((3, 1, -2), (1, 4, 2)),
    dot((-1, 2, 2), (5, 3, 1)),
    det(2, 3, 1, 4),
    det(5, -1, 3, 2),
]


def main() -> None:
    slug_counts: dict[str, int] = {}
    problems, solutions = [], []
    for spec in PROBLEMS:
        slug = spec["subject"].lower().replace(" & ", "_").replace(" ", "_")
        slug_counts[slug] = slug_counts.get(slug, 0) + 1
        uid = f"demo/{slug}/{slug_counts[slug]:03d}.json"
        problems.append(
            {k: spec[k] for k in ("problem", "solution", "answer", "subject", "level")}
            | {"unique_id": uid}
        )
        for s in spec["sols"]:
            answer = s["steps"][-1].removeprefix(A)
            solutions.append(
                {
                    "unique_id": uid,
                    "steps": s["steps"],
                    "answer": answer,
                    "source": "demo",
                    "gold_ratings": s["ratings"],
                    "kind": s["kind"],
                }
                | ({"alternatives": s["alternatives"]} if "alternatives" in s else {})
            )
    for name, rows in (("problems.jsonl", problems), ("solutions.jsonl", solutions)):
        (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{len(problems)} problems, {len(solutions)} solutions")


if __name__ == "__main__":
    main()
