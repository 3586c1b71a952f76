"""The framework-agnostic trainer (in the style of lambeq's `Trainer`): `fit` runs the training
steps a subclass implements and keeps each batch's predictions to evaluate the epoch's metrics.

Source: Quantinuum/lambeq pull request #251, "bugfix: PytorchTrainer memory leak": "Detach the
tensors returned in the training loops to ensure the computation graph can be cleared from memory
properly after each batch"; the fix is in the subclass: `return y_hat.detach(), loss.item()`.
"""

from abc import ABC, abstractmethod


class Trainer(ABC):
    def __init__(self, model, loss_function, epochs, evaluate_functions=None, verbose="text"):
        self.model = model
        self.loss_function = loss_function
        self.epochs = epochs
        self.evaluate_functions = evaluate_functions or {}
        self.verbose = verbose
        self.train_costs = []
        self.train_epoch_costs = []
        self.train_eval_results = {name: [] for name in self.evaluate_functions}

    @abstractmethod
    def training_step(self, batch):
        """One optimisation step on a batch: returns the predictions and the loss (a float)."""

    def fit(self, train_dataset):
        for epoch in range(self.epochs):
            epoch_preds = []
            epoch_labels = []
            epoch_cost = 0.0
            for batch in train_dataset:
                y_hat, loss = self.training_step(batch)
                epoch_cost += loss * len(batch[0])
                epoch_preds.append(y_hat)  # expect: LS002
                epoch_labels.append(batch[1])
            self.train_epoch_costs.append(epoch_cost / len(train_dataset.data))
            for name, fn in self.evaluate_functions.items():
                self.train_eval_results[name].append(fn(epoch_preds, epoch_labels))
            if self.verbose == "text":
                print(f"Epoch {epoch + 1}: train/loss: {self.train_epoch_costs[-1]:.4f}")
