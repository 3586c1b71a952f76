//! The principles of the project-wide analysis, each as a small project held in memory and
//! checked through `project::check_sources` (the entry point `check` uses): what one file's
//! finding needs from another, and what must not travel between files.

use leakspy_lint::project::{check_sources, Source};
use leakspy_lint::{RuleSet, SourceKind};

/// A project's files checked together.
fn checked(files: &[(&str, &str)]) -> Vec<leakspy_lint::CheckedSource> {
    let sources: Vec<Source> = files
        .iter()
        .map(|(path, text)| Source {
            path,
            text,
            kind: SourceKind::Python,
        })
        .collect();
    check_sources(&sources, &RuleSet::default())
}

/// (file, line, code) of every finding of a project.
fn findings(files: &[(&str, &str)]) -> Vec<(String, usize, String)> {
    let results = checked(files);
    let mut out = Vec::new();
    for ((path, text), mut checked) in files.iter().zip(results) {
        assert!(checked.syntax_error.is_none(), "{path}");
        let index = checked.take_line_index(text);
        for d in &checked.diagnostics {
            let line = index.line_column(d.range.start(), text).line.get();
            out.push((path.to_string(), line, d.rule.code().to_string()));
        }
    }
    out.sort();
    out
}

const LOOP: &str = "\
import torch
from problems import Problem

problem = Problem()
train_y = torch.zeros(0)
for it in range(100):
    x = torch.rand(4, 2)
    train_y = torch.cat([train_y, problem(x)])
";

#[test]
fn a_module_of_another_file_that_makes_no_parameters_makes_no_graph() {
    let parameterless = "\
import torch


class Problem(torch.nn.Module):
    def __init__(self, noise_std=None):
        super().__init__()
        self.noise_std = noise_std
        self.register_buffer(\"bounds\", torch.tensor([[0.0, 0.0], [1.0, 1.0]]))

    def forward(self, x):
        return (x ** 2).sum(-1)
";
    assert_eq!(
        findings(&[("problems.py", parameterless), ("bo.py", LOOP)]),
        vec![]
    );
    let with_layer = parameterless.replace(
        "self.noise_std = noise_std",
        "self.net = torch.nn.Linear(2, 1)",
    );
    assert_eq!(
        findings(&[("problems.py", &with_layer), ("bo.py", LOOP)]),
        vec![("bo.py".to_string(), 8, "LS010".to_string())]
    );
}

#[test]
fn what_one_caller_passes_is_not_what_the_function_returns_to_another() {
    let helpers = "\
def scalar(x):
    return x
";
    // One file passes a loss with its graph (and keeps it: a finding there)...
    let trains = "\
import torch.nn.functional as F
from helpers import scalar


def train(model, loader, optimizer):
    kept = []
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(scalar(loss))
    return kept
";
    // ... another passes numbers: what it gets back carries no graph.
    let counts = "\
import torch.nn.functional as F
from helpers import scalar


def train(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += scalar(loss.item())
    return total
";
    assert_eq!(
        findings(&[
            ("helpers.py", helpers),
            ("trains.py", trains),
            ("counts.py", counts)
        ]),
        vec![("trains.py".to_string(), 12, "LS002".to_string())]
    );
}

#[test]
fn an_object_made_per_step_elsewhere_keeps_its_attributes_for_one_step() {
    let detector = "\
class Detector:
    def __init__(self, model):
        self.hooks = []
        for m in model.modules():
            self.add_hooks(m)

    def add_hooks(self, module):
        self.hooks.append(module.register_forward_hook(print))
";
    let train = "\
from detector import Detector


def train(model, loader, optimizer):
    for x in loader:
        with Detector(model):
            loss = model(x).sum()
        loss.backward()
        optimizer.step()
";
    assert_eq!(
        findings(&[("detector.py", detector), ("train.py", train)]),
        vec![]
    );
}

const NORM_LAYER: &str = "\
import torch
import torch.nn as nn


class BatchStat(nn.Module):
    def __init__(self, n, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer(\"running_mean\", torch.zeros(n))

    def forward(self, x):
        mean = x.mean((0, 2, 3))
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
        return x - mean.view(1, -1, 1, 1)
";

/// A layer of another file placed after a module (called as `self.norm(self.conv(x))`, or
/// listed after one in the layers a `Sequential` runs) gets that module's output: a graph,
/// with autograd on. Listed first, or called on the data, it gets none.
#[test]
fn a_layer_of_another_file_gets_the_previous_layers_graph() {
    let called = "\
import torch.nn as nn
from layers import BatchStat


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = BatchStat(8)

    def forward(self, x):
        return self.norm(self.conv(x))
";
    let listed = "\
import torch.nn as nn
from layers import BatchStat


def make(widths):
    layers = []
    c = 3
    for w in widths:
        layers += [nn.Conv2d(c, w, 3), BatchStat(w), nn.ReLU()]
        c = w
    return nn.Sequential(*layers)
";
    let first = "\
import torch.nn as nn
from layers import BatchStat


def make():
    return nn.Sequential(BatchStat(3), nn.Conv2d(3, 8, 3))
";
    let leak = vec![("layers.py".to_string(), 13, "LS011".to_string())];
    assert_eq!(
        findings(&[("layers.py", NORM_LAYER), ("net.py", called)]),
        leak
    );
    assert_eq!(
        findings(&[("layers.py", NORM_LAYER), ("net.py", listed)]),
        leak
    );
    assert_eq!(
        findings(&[("layers.py", NORM_LAYER), ("net.py", first)]),
        vec![]
    );
}

#[test]
fn an_object_passed_to_init_is_what_the_holder_calls_per_step() {
    // The agent is made in one file and handed to a runner in another, which keeps it as a
    // plain parameter and calls its `remember()` and `learn()` once per environment step: the
    // loop trains through the agent, and the agent's list grows per step. Passing something
    // whose class is unknown tells nothing.
    let agent = "\
import torch


class Agent:
    def __init__(self):
        self.net = torch.nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.memory = []

    def remember(self, transition):
        self.memory.append(transition)

    def learn(self, obs):
        loss = self.net(obs).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
";
    let runner = "\
class Runner:
    def __init__(self, agent, env):
        self.agent = agent
        self.env = env

    def run(self, steps):
        obs = self.env.reset()
        for _ in range(steps):
            nxt, reward, done = self.env.step(0)
            self.agent.remember((obs, reward, nxt, done))
            self.agent.learn(obs)
            obs = self.env.reset() if done else nxt
";
    let main = |agent_line: &str| {
        format!(
            "\
from agent import Agent
from runner import Runner


def main(env, given):
    {agent_line}
    Runner(agent, env).run(10000)
"
        )
    };
    let known = main("agent = Agent()");
    assert_eq!(
        findings(&[
            ("agent.py", agent),
            ("runner.py", runner),
            ("main.py", &known)
        ]),
        vec![("agent.py".to_string(), 11, "LS014".to_string())]
    );
    let unknown = main("agent = given");
    assert_eq!(
        findings(&[
            ("agent.py", agent),
            ("runner.py", runner),
            ("main.py", &unknown)
        ]),
        vec![]
    );
}

const SAMPLER: &str = "\
import torch
from vocab import ALPHABET


def sample(m, prime, length):
    hidden = m.init_hidden(1)
    inp = prime
    text = ''
    for _ in range(length):
        output, hidden = m(inp, hidden)
        top = torch.multinomial(output.data.view(-1).exp(), 1)[0]
        text += ALPHABET[top]
        inp = top.view(1, 1)
    return text
";

const VOCAB: &str = "\
import string

ALPHABET = string.printable
";

const CHAR_MODEL: &str = "\
import torch.nn as nn


class CharModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 8)

    def forward(self, x, h):
        return self.rnn(x, h)
";

/// A sampling loop in one file, run from another: whether the caller there has autograd on,
/// what it passes (a module of a third file) and what the returned text is made of (a constant
/// of a fourth) all come from other files.
#[test]
fn a_sampling_loop_is_judged_by_how_other_files_call_it() {
    let with_grad = "\
from models import CharModel
from sampling import sample

net = CharModel()
print(sample(net, None, 500))
";
    let without_grad = "\
import torch
from models import CharModel
from sampling import sample

net = CharModel()
with torch.no_grad():
    print(sample(net, None, 500))
";
    let project = |main| {
        findings(&[
            ("main.py", main),
            ("models.py", CHAR_MODEL),
            ("sampling.py", SAMPLER),
            ("vocab.py", VOCAB),
        ])
    };
    assert_eq!(
        project(with_grad),
        vec![("sampling.py".to_string(), 10, "LS008".to_string())]
    );
    assert_eq!(project(without_grad), vec![]);
    // Alone, nothing says how it is called, what `m` is or what `ALPHABET` holds.
    assert_eq!(findings(&[("sampling.py", SAMPLER)]), vec![]);
}

/// Set-up code that runs a model to learn its shapes builds a graph once, when the object is
/// made: not a state carried across steps, even when another file makes the object.
#[test]
fn set_up_code_run_from_another_file_is_not_a_sampling_loop() {
    let probe = "\
import torch


class ShapeProbe:
    def __init__(self, encoder, x, depth):
        for _ in range(depth):
            x = encoder(x)
        self.width = x.shape[-1]
";
    let main = "\
import torch
from probe import ShapeProbe

p = ShapeProbe(torch.nn.Linear(8, 8), torch.zeros(1, 8), 20)
";
    assert_eq!(findings(&[("main.py", main), ("probe.py", probe)]), vec![]);
}

const SMART_MODE: &str = "\
import torch


def smart_inference_mode(new_torch=True):
    def decorate(fn):
        return (torch.inference_mode if new_torch else torch.no_grad)()(fn)

    return decorate
";

/// A decorator of the project that applies `torch.inference_mode` (or `no_grad`) turns
/// autograd off for what it wraps, as the torch one does: the validation loop keeps no graph.
#[test]
fn a_project_decorator_that_turns_grad_off_is_read_as_one() {
    let val = |decorator: &str| {
        format!(
            "\
import torch
from utils import smart_inference_mode


{decorator}
def run(model, loader):
    model.eval()
    stats = []
    for x, y in loader:
        out = model(x)
        stats.append(out)
    return stats
"
        )
    };
    let with = val("@smart_inference_mode()");
    let without = val("");
    assert_eq!(
        findings(&[("val.py", &with), ("utils.py", SMART_MODE)]),
        vec![]
    );
    assert_eq!(
        findings(&[("val.py", &without), ("utils.py", SMART_MODE)])
            .into_iter()
            .map(|f| f.2)
            .collect::<Vec<_>>(),
        vec!["LS009".to_string()]
    );
}

#[test]
fn parameters_passed_from_another_file_require_grad() {
    // A weight average kept in its own file, updated from what the training script passes it:
    // `model.parameters()` at every call. With autograd on, each in-place update records the
    // parameters and chains the averages to every earlier step; under `torch.no_grad()`, or
    // when a caller passes something else, nothing is said.
    let ema = |decorator: &str| {
        format!(
            "\
import torch


class WeightAverage:
    def __init__(self, parameters, decay=0.999):
        self.decay = decay
        self.shadow = [p.clone().detach() for p in parameters]
{decorator}
    def update(self, parameters):
        for s, p in zip(self.shadow, parameters):
            s.sub_((1.0 - self.decay) * (s - p))
"
        )
    };
    let train = |passed: &str| {
        format!(
            "\
import torch
from ema import WeightAverage


def main(batches):
    model = torch.nn.Linear(10, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    average = WeightAverage(model.parameters())
    for x in batches:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        average.update({passed})
"
        )
    };
    let leak = vec![("ema.py".to_string(), 11, "LS011".to_string())];
    assert_eq!(
        findings(&[
            ("ema.py", &ema("")),
            ("train.py", &train("model.parameters()"))
        ]),
        leak
    );
    assert_eq!(
        findings(&[
            ("ema.py", &ema("    @torch.no_grad()")),
            ("train.py", &train("model.parameters()"))
        ]),
        vec![]
    );
    assert_eq!(
        findings(&[
            ("ema.py", &ema("")),
            (
                "train.py",
                &train("[p.detach() for p in model.parameters()]")
            )
        ]),
        vec![]
    );
}

#[test]
fn an_in_place_helper_of_another_file_keeps_the_total() {
    // `accumulate(running, loss)` with `running.add_(value)` in a helpers file: the total keeps
    // every step's graph as `running += loss` would. A helper that adds into its first
    // parameter something else than the second (a constant) says nothing of `loss`.
    let helpers = "\
def accumulate(total, value):
    total.add_(value)


def bump(total, value):
    total.add_(1)
";
    let train = |call: &str| {
        format!(
            "\
import torch
from helpers import accumulate, bump


def train(model, loader, opt):
    running = torch.zeros(())
    for epoch in range(10):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            {call}
        print(running.item())
"
        )
    };
    assert_eq!(
        findings(&[
            ("helpers.py", helpers),
            ("train.py", &train("accumulate(running, loss)"))
        ]),
        vec![("train.py".to_string(), 13, "LS001".to_string())]
    );
    assert_eq!(
        findings(&[
            ("helpers.py", helpers),
            ("train.py", &train("bump(running, loss)"))
        ]),
        vec![]
    );
}

/// The LS002 findings of a project, each with whether a fix is offered: (file, has a fix).
fn store_fixes(files: &[(&str, &str)]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for ((path, _), result) in files.iter().zip(checked(files)) {
        for d in result
            .diagnostics
            .iter()
            .filter(|d| d.rule.code() == "LS002")
        {
            out.push((path.to_string(), d.fix.is_some()));
        }
    }
    out
}

#[test]
fn a_parameter_every_call_elsewhere_passes_a_tensor_gets_its_detach_fix() {
    let meter = "\
class LossMeter:
    def __init__(self):
        self.history = []

    def update(self, value):
        self.history.append(value)

    def mean(self):
        return sum(float(v) for v in self.history) / max(len(self.history), 1)
";
    let train = |arg: &str| {
        format!(
            "\
import torch
from meters import LossMeter

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
meter = LossMeter()
for step in range(1000):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    meter.update({arg})
"
        )
    };
    // The loss itself: a tensor, stored with its graph; `.detach()` keeps the values.
    let tensor = train("loss");
    assert_eq!(
        store_fixes(&[("meters.py", meter), ("train.py", &tensor)]),
        vec![("meters.py".to_string(), true)]
    );
    // A tuple holding it: no tensor to detach.
    let tuple = train("(loss, step)");
    assert_eq!(
        store_fixes(&[("meters.py", meter), ("train.py", &tuple)]),
        vec![("meters.py".to_string(), false)]
    );
}

#[test]
fn a_queue_another_file_drains_is_no_history() {
    // One module fills the queue on every call; the loop in another takes from it.
    let state = "\
import collections

import torch


class StepState:
    activations = collections.deque()

    def run_communication(self, recv):
        self.activations.append(recv())
";
    let drains = "\
import torch

from state import StepState


def train(model, opt, loader):
    state = StepState()
    for batch in loader:
        state.run_communication(lambda: model(batch).detach())
        x = state.activations.popleft()
        x.sum().backward()
        opt.step()
";
    assert_eq!(
        findings(&[("state.py", state), ("train.py", drains)]),
        vec![]
    );
    let keeps = drains.replace("x = state.activations.popleft()", "x = model(batch)");
    assert_eq!(
        findings(&[("state.py", state), ("train.py", &keeps)]),
        vec![("state.py".to_string(), 10, "LS014".to_string())]
    );
}

const EPISODE_BUFFER: &str = "\
import numpy as np


class EpisodeBuffer:
    def __init__(self):
        self.obs = []

    def put(self, obs):
        self.obs.append(np.asarray(obs))
";

/// An object that another file's loop renews when its stretch ends (`episode[i] =
/// EpisodeBuffer()` under `if done:` in the loop that calls `episode[i].put(...)`) keeps one
/// episode; made once before a training loop that only grows it, it keeps the whole run.
#[test]
fn an_object_another_files_loop_renews_keeps_one_stretch() {
    let renewed = "\
import torch
from buffers import EpisodeBuffer


def train(agent, envs, optimizer, steps):
    episode = [EpisodeBuffer() for _ in envs]
    obs = [env.reset() for env in envs]
    for _ in range(steps):
        loss = agent.loss(obs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for i, env in enumerate(envs):
            obs[i], done = env.step(agent.act(obs[i]))
            episode[i].put(obs[i])
            if done:
                agent.memory.store(episode[i])
                episode[i] = EpisodeBuffer()
";
    assert_eq!(
        findings(&[("buffers.py", EPISODE_BUFFER), ("train.py", renewed)]),
        vec![]
    );
    let kept = "\
import torch
from buffers import EpisodeBuffer


def train(agent, env, optimizer, steps):
    episode = EpisodeBuffer()
    obs = env.reset()
    for _ in range(steps):
        loss = agent.loss(obs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        obs, done = env.step(agent.act(obs))
        episode.put(obs)
";
    assert_eq!(
        findings(&[("buffers.py", EPISODE_BUFFER), ("train.py", kept)]),
        vec![("buffers.py".to_string(), 9, "LS014".to_string())]
    );
}

const GREEDY_DECODER: &str = "\
import torch
from base import BaseDecoder


class GreedyDecoder(BaseDecoder):
    def __init__(self, max_seq_len=25):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.classifier = torch.nn.Linear(8, 8)

    def forward_train(self, feat):
        return self.classifier(feat)

    def forward_test(self, feat):
        outputs = []
        for step in range(self.max_seq_len):
            outputs.append(self.classifier(feat[:, step]))
        return torch.stack(outputs, dim=1)
";

/// A decode loop that a base class's `forward` runs (`self.forward_test(feat)`) goes over the
/// time steps of one forward pass, also where the base is OpenMMLab's `BaseModule` (an
/// `nn.Module`): whether autograd records is the caller's choice. Without the base in sight,
/// the loop reads as an evaluation loop.
#[test]
fn a_decode_loop_a_base_modules_forward_runs_is_part_of_the_pass() {
    let base = "\
from mmengine.model import BaseModule


class BaseDecoder(BaseModule):
    def forward(self, feat, mode=\"predict\"):
        if mode == \"loss\":
            return self.forward_train(feat)
        return self.forward_test(feat)

    def forward_train(self, feat):
        raise NotImplementedError

    def forward_test(self, feat):
        raise NotImplementedError
";
    assert_eq!(
        findings(&[("base.py", base), ("greedy.py", GREEDY_DECODER)]),
        vec![]
    );
    assert_eq!(
        findings(&[("greedy.py", GREEDY_DECODER)]),
        vec![("greedy.py".to_string(), 16, "LS009".to_string())]
    );
}

const PREDICT: &str = "\
import torch

from .toolkit import eval_context


def predict(model, loader):
    results = []
    with eval_context(model):
        for batch in loader:
            results.append(model(batch))
    return torch.cat(results)
";

/// A context manager of the project whose protocol methods turn autograd off (here through
/// its base, which builds the `torch.no_grad()` it enters) runs its block without grad, in
/// the files that import it too. A class that names `no_grad` only in another method (a
/// trainer's `evaluate()`) is no such context.
#[test]
fn a_project_context_manager_that_enters_no_grad_turns_grad_off() {
    let toolkit = "\
import torch


class mode_context:
    def __init__(self, module, *, to_train, use_grad):
        self.module, self.to_train = module, to_train
        self.grad = torch.enable_grad() if use_grad else torch.no_grad()

    def __enter__(self):
        self.module.train(self.to_train)
        self.grad.__enter__()

    def __exit__(self, *args):
        self.grad.__exit__(*args)


class eval_context(mode_context):
    def __init__(self, module, *, use_grad=False):
        super().__init__(module, to_train=False, use_grad=use_grad)
";
    assert_eq!(
        findings(&[("toolkit.py", toolkit), ("predict.py", PREDICT)]),
        vec![]
    );
    let only_eval = "\
import torch


class eval_context:
    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.module.eval()

    def __exit__(self, *args):
        self.module.train()

    def score(self, x):
        with torch.no_grad():
            return self.module(x)
";
    assert_eq!(
        findings(&[("toolkit.py", only_eval), ("predict.py", PREDICT)]),
        vec![("predict.py".to_string(), 9, "LS009".to_string())]
    );
}
