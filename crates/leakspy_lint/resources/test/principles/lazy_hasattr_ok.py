# Code under `if not hasattr(self, "fig"):` that sets `self.fig` runs once: one figure, updated
# on every call.
import matplotlib.pyplot as plt


class ShowGraph:
    def after_epoch(self, losses):
        self.update_graph(losses)

    def update_graph(self, losses):
        if not hasattr(self, "graph_fig"):
            self.graph_fig, self.graph_ax = plt.subplots(1, figsize=(6, 4))
        self.graph_ax.clear()
        self.graph_ax.plot(losses)
