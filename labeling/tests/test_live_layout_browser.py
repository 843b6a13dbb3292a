"""Live labeling's page laid out as well as the workbench's (issue 30, point 1), and keeping
the labeler busy (point 2): at 1400 and 390 px, proposals numbered as the buttons name them,
"Continue from proposal N" on one line in the text's column, "written by you" on one line,
no sideways scroll, the keys' help and the queue count as on the phase-2 page; the next
step's proposals prepared while the labeler rates this step's, so that after the first
there is no wait.

The proposals come from a scripted generator: this is the page's layout; the real generator
(SmolLM2 behind `transformers serve`) drives the same page in test_live_browser.py."""

import time

import pytest
from playwright.sync_api import expect

from generators import GeneratorSpec, SamplingSettings
from labeling.models import Problem
from labeling.services import live

PROPOSALS = [
    "Let $x$ be the number of apples, so $3x + 2 = 17$.",
    "Subtract $2$ from both sides: $3x = 15$.",
    "Divide by three, $x = \\frac{15}{3}$.",
]


class Scripted:
    delay = 0.0  # seconds per call: a generator that takes its time, as a real one does

    def __init__(self, spec):
        self.spec = spec

    def generate(self, *, requests, settings):
        time.sleep(Scripted.delay)
        # Numbered by call, so that no proposal repeats a step already taken.
        Scripted.calls = getattr(Scripted, "calls", 0) + 1
        return [
            f"{PROPOSALS[i % len(PROPOSALS)]} (call {Scripted.calls})" for i in range(len(requests))
        ]

    def close(self):
        pass


@pytest.fixture
def live_generation(transactional_db, monkeypatch, eager_tasks):
    monkeypatch.setattr(live, "open_generator", Scripted)
    monkeypatch.setattr(Scripted, "delay", 0.0)
    problems = [
        Problem.objects.create(
            text=f"Three times a number, plus ${n}$, is $17$. Find it.", answer="5"
        )
        for n in (2, 5, 8)
    ]
    return live.create_live_generation(
        user=None,
        problem_ids=[p.pk for p in problems],
        generator=GeneratorSpec(backend="openai", model="scripted", base_url="http://generator/v1"),
        settings=SamplingSettings(temperature=0.7, max_tokens=64, seed=3),
        proposals=3,
    )


def lines(locator) -> int:
    """How many lines the element's text is laid out on (one rectangle per line fragment)."""
    return locator.evaluate(
        """e => {
            const range = document.createRange();
            range.selectNodeContents(e);
            return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
        }"""
    )


def check_layout(page, *, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    proposals = page.locator("#live-steps .proposals > li")
    expect(proposals).to_have_count(3)
    assert proposals.locator(".number").all_inner_texts() == ["1.", "2.", "3."]
    choose = page.locator("#live-steps button.choose").first
    expect(choose).to_have_text("Continue from proposal 1")
    box = choose.bounding_box()
    # The whole label on one line: not crushed into the number's column ("Co / fro / pro / 1").
    assert choose.evaluate("e => e.scrollWidth <= e.clientWidth"), box
    assert box["width"] >= 120 and lines(choose) == 1, box
    note = page.locator("#live-steps .written-by-you")
    expect(note).to_have_text("written by you")
    assert lines(note) == 1, note.bounding_box()
    size = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert size[0] <= size[1], size


def test_live_page_at_1400_and_390(page, live_server, live_generation):
    page.goto(f"{live_server.url}/label/")
    proposals = page.locator("#live-steps .proposals > li")
    expect(proposals).to_have_count(3)
    # As on the phase-2 page: what is left, and the keys' help.
    expect(page.locator("#queue-left")).to_have_text("2 more problems in your queue after this one")
    page.get_by_role("link", name="Keys (?)").click()
    expect(page.locator("#keymap")).to_be_visible()
    page.keyboard.press("Escape")
    # Step 1: every proposal wrong, the labeler writes it ("written by you").
    for _ in range(3):
        page.keyboard.press("1")
    expect(page.locator("#human-completion")).to_be_visible()
    page.keyboard.press("w")
    page.keyboard.type("Let $x$ be the number: $3x + 2 = 17$.")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#live-steps .path > li")).to_have_count(1)
    # Step 2: proposals rated +1, so each can be continued from.
    expect(proposals).to_have_count(3)
    for _ in range(3):
        page.keyboard.press("3")
    expect(page.locator("#live-steps button.choose")).to_have_count(3)
    for width in (1400, 390):
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            check_layout(page, width=width)


def test_after_the_first_step_the_next_proposals_are_there_when_the_labeler_is(
    page, live_server, live_generation
):
    # Each generator call takes 2 s. The proposals of step 1 are awaited (nothing could
    # prepare them); the +1 on a proposal starts its next step's proposals at once, so
    # choosing it (Enter) shows them without a wait.
    Scripted.delay = 2.0
    page.goto(f"{live_server.url}/label/")
    proposals = page.locator("#live-steps .proposals > li")
    expect(proposals).to_have_count(3, timeout=20_000)
    for key in ("3", "1", "1"):
        page.keyboard.press(key)
    expect(page.locator("#live-steps .proposals > li[data-rated]")).to_have_count(3, timeout=20_000)
    started = time.monotonic()
    page.keyboard.press("Enter")
    expect(page.locator("#live-steps .path > li")).to_have_count(1, timeout=20_000)
    expect(proposals).to_have_count(3, timeout=20_000)
    waited = time.monotonic() - started
    assert page.locator("#live-pending").count() == 0
    assert waited < 1.5, f"waited {waited:.1f} s for step 2's proposals"


def test_keys_typed_into_the_write_box_stay_there_when_an_answer_swaps_the_step_in(
    page, live_server, live_generation
):
    # Every proposal rated -1, the labeler changes a rating with the mouse and clicks into the
    # write box before the answer comes back: the answer replaces the step while the box is
    # focused and still empty. The new box keeps the focus, so what the labeler types next is
    # their step, not rating keys ("1" would be a -1).
    page.goto(f"{live_server.url}/label/")
    proposals = page.locator("#live-steps .proposals > li")
    expect(proposals).to_have_count(3)
    for _ in range(3):
        page.keyboard.press("1")
    box = page.locator("#human-completion")
    expect(box).to_be_visible()
    held = []

    def hold(route):
        held.append(route)

    page.route("**/live/rate/", hold)
    proposals.first.get_by_role("button", name="-1 bad").click()
    while not held:
        page.wait_for_timeout(20)
    box.focus()
    held.pop().continue_()
    page.unroute("**/live/rate/", hold)
    expect(page.locator("#rating-status")).to_have_text("Proposal 1 rated -1.")
    page.keyboard.type("1 more than")
    expect(box).to_have_value("1 more than")
    expect(box).to_be_focused()
    expect(page.locator("#rating-status")).to_have_text("Proposal 1 rated -1.")
