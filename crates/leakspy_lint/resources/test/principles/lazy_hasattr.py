# Code under `if not hasattr(self, "fig"):` that sets `self.fig` runs once, as under `if self.fig
# is None:`; the same figure made on every call leaks one figure per call.
import matplotlib.pyplot as plt


class ShowGraph:
    def after_epoch(self, losses):
        self.update_graph(losses)

    def update_graph(self, losses):
        fig, ax = plt.subplots(1, figsize=(6, 4))  # expect: LS012
        ax.plot(losses)
        self.shown = ax.get_title()
