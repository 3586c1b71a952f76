"""The experiment logger: keeps every logged statistic to print recent averages."""

from collections import defaultdict, deque

import numpy as np


class Logger:
    def __init__(self, console_logger):
        self.console_logger = console_logger
        self.stats = defaultdict(lambda: deque(maxlen=100))

    def log_stat(self, key, value, t):
        self.stats[key].append((t, value))

    def print_recent_stats(self):
        log_str = f"Recent Stats | t_env: {self.stats['episode'][-1][0]:>10}\n"
        for k, v in sorted(self.stats.items()):
            window = 5 if k != "epsilon" else 1
            log_str += f"{k + ':':<25}{np.mean([x[1] for x in v[-window:]]):.4f}\n"
        self.console_logger.info(log_str)
