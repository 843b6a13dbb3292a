"""A training run's curves as geometry for an inline SVG (templates/trainer/_run_chart.html).

Drawn on the server: the page's content security policy allows no inline script or style, and
the run page polls its fragment, so a chart in the fragment is redrawn with every poll for
free. Each chart has an epoch axis (x) and a labelled value axis (y).
"""

from dataclasses import dataclass, field

from trainer.training.metrics import name_of

# The viewBox and the plot area inside it (room left and below for the axis labels).
WIDTH, HEIGHT = 420, 200
LEFT, RIGHT, TOP, BOTTOM = 48, 410, 12, 160

LOSS_CURVES = ("train_loss", "eval_loss")
METRIC_CURVES = ("step_accuracy", "step_auroc", "first_error_f1", "best_of_n")


@dataclass
class Tick:
    x: float
    y: float
    label: str


@dataclass
class Curve:
    name: str  # the metric's key
    label: str  # its name as a person reads it
    css: str  # c1..c4: the colour, shared with the legend
    points: str  # the polyline's points
    dots: list[tuple[float, float]]  # one marker per epoch, so a single epoch shows too


@dataclass
class Chart:
    title: str
    y_label: str
    curves: list[Curve]
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = RIGHT
    top: int = TOP
    bottom: int = BOTTOM

    @property
    def x_label_x(self) -> float:
        return (self.left + self.right) / 2

    @property
    def y_label_y(self) -> float:
        return (self.top + self.bottom) / 2


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _epoch_x(epochs: list[int]) -> dict[int, float]:
    low, high = min(epochs), max(epochs)
    span = max(high - low, 1)
    if low == high:  # one epoch: in the middle
        return {low: (LEFT + RIGHT) / 2}
    return {e: LEFT + (RIGHT - LEFT) * (e - low) / span for e in epochs}


def _x_ticks(epochs: list[int], xs: dict[int, float]) -> list[Tick]:
    # At most about 10 labels, always the first and the last epoch.
    step = max(1, -(-len(epochs) // 10))
    shown = epochs[::step]
    if epochs[-1] not in shown:
        shown.append(epochs[-1])
    return [Tick(x=xs[e], y=BOTTOM + 14, label=str(e)) for e in shown]


def _chart(
    *, title: str, y_label: str, names: tuple[str, ...], metrics: list[dict], top: float | None
) -> Chart | None:
    rows = [(m.get("epoch"), m) for m in metrics]
    rows = [(e, m) for e, m in rows if isinstance(e, int) and not isinstance(e, bool)]
    if not rows:
        return None
    series = {
        name: [(e, v) for e, m in rows if (v := _number(m.get(name))) is not None] for name in names
    }
    series = {name: values for name, values in series.items() if values}
    if not series:
        return None
    epochs = sorted({e for e, _ in rows})
    xs = _epoch_x(epochs)
    if top is None:  # a loss: from 0 to a little above its largest value
        top = max(v for values in series.values() for _, v in values) * 1.1 or 1.0
    scale = (BOTTOM - TOP) / top

    def y(value: float) -> float:
        return BOTTOM - scale * min(max(value, 0.0), top)

    curves = []
    for index, name in enumerate(names, start=1):
        if name not in series:
            continue
        dots = [(round(xs[e], 1), round(y(v), 1)) for e, v in series[name]]
        points = " ".join(f"{px},{py}" for px, py in dots)
        curves.append(
            Curve(name=name, label=name_of(name), css=f"c{index}", points=points, dots=dots)
        )
    y_ticks = [
        Tick(x=LEFT - 6, y=round(y(top * k / 4), 1) + 3, label=f"{top * k / 4:.2g}")
        for k in range(5)
    ]
    return Chart(
        title=title,
        y_label=y_label,
        curves=curves,
        x_ticks=_x_ticks(epochs, xs),
        y_ticks=y_ticks,
    )


def run_charts(*, metrics: list[dict]) -> list[Chart]:
    """The loss chart (training and held-out loss) and the held-out metrics chart (0 to 1),
    each over the epochs; a chart without a value to draw is left out."""
    charts = [
        _chart(
            title="Loss per epoch", y_label="loss", names=LOSS_CURVES, metrics=metrics, top=None
        ),
        _chart(
            title="Held-out metrics per epoch",
            y_label="metric",
            names=METRIC_CURVES,
            metrics=metrics,
            top=1.0,
        ),
    ]
    return [chart for chart in charts if chart is not None]
