"""Notebooks 03-06: the loss curve redrawn while a run trains, in its own module because training (`rev.chapters.shared.runs`)
needs it while the run figures (`rev.chapters.shared.run_plots`) need training's speed readings.
"""
from __future__ import annotations


class LiveLoss:
    """Training callback that redraws the loss curve in a notebook every `every` steps (one figure,
    updated in place, so a headless run records just the final picture), in the run's colour (`colour`: the
    palette's for a workbook run, grey for another): training faint, validation as dots."""

    def __init__(self, title: str, every: int = 20, colour: str = "#7f7f7f"):
        self.title, self.every, self.colour = title, every, colour
        self.steps: list[int] = []
        self.loss: list[float] = []
        self.val: list[tuple[int, float]] = []
        self.handle = None

    def __call__(self, step: int, row: dict, model) -> None:
        self.steps.append(row["tokens"])
        self.loss.append(row["loss"])
        if row["val_loss"] != "":
            self.val.append((row["tokens"], row["val_loss"]))
        if step % self.every == 0 or row["val_loss"] != "":
            self.draw()

    def draw(self) -> None:
        import matplotlib.pyplot as plt
        from IPython.display import display

        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot(self.steps, self.loss, lw=1.0, alpha=0.5, color=self.colour, label="train")
        if self.val:
            ax.plot(*zip(*self.val), "o-", color=self.colour, label="validation")
        ax.set(xlabel="tokens", ylabel="loss", title=self.title)
        ax.legend()
        fig.tight_layout()
        if self.handle is None:
            self.handle = display(fig, display_id=True)
        else:
            self.handle.update(fig)
        plt.close(fig)
