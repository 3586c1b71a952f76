//! One test per framework hook of `semantic/hooks.rs`: a graph-carrying output kept by a hook
//! of that name (or a handler of that event) is reported as kept once per step or epoch, with
//! autograd on (LS002, the graph) or off (LS014, a history of tensors) as the framework runs
//! it; the same code in a method no framework calls raises nothing.

mod common;

use common::found;
use leakspy_lint::semantic::facts::{visit_body, ModuleFacts};
use leakspy_lint::semantic::hooks::{Framework, HOOKS};
use leakspy_lint::semantic::iteration::{Grain, Training};
use leakspy_lint::SourceKind;
use ruff_python_ast::Stmt;

/// How often the analysis says the function `name` of `source` runs.
fn cadence_of(source: &str, name: &str) -> Option<Grain> {
    let parsed = ruff_python_parser::parse_module(source).unwrap();
    let suite = parsed.suite();
    let facts = ModuleFacts::collect(suite);
    let training = Training::collect(
        source,
        suite,
        &facts,
        &Default::default(),
        &leakspy_lint::summaries::NO_FACTS,
    );
    let mut grain = None;
    visit_body(suite, &mut |s| {
        if let Stmt::FunctionDef(f) = s {
            if f.name.as_str() == name {
                grain = training.cadence(f).grain();
            }
        }
    });
    grain
}

fn method_hook(name: &str) -> String {
    format!(
        "import torch.nn as nn\n\n\nclass Callback:\n    def __init__(self):\n        \
         self.net = nn.Linear(4, 2)\n        self.kept = []\n\n    def {name}(self, *args):\n        \
         out = self.net(args[0])\n        self.kept.append(out)\n\n\nCallback()\n"
    )
}

fn event_handler(event: &str, decorated: bool) -> String {
    let register = if decorated {
        format!("@trainer.on(Events.{event}(every=1))\n")
    } else {
        String::new()
    };
    let add = if decorated {
        String::new()
    } else {
        format!("\n\ntrainer.add_event_handler(Events.{event}, keep)\n")
    };
    format!(
        "import torch.nn as nn\nfrom ignite.engine import Engine, Events\n\nnet = nn.Linear(4, 2)\n\
         kept = []\ntrainer = Engine(lambda e, b: 0.0)\n\n\n{register}def keep(engine):\n    \
         kept.append(net(engine.state.batch))\n{add}"
    )
}

#[test]
fn every_hook_runs_per_iteration_with_the_grad_mode_of_its_framework() {
    let mut failures = Vec::new();
    for hook in HOOKS {
        let cases: Vec<(String, usize)> = if hook.framework == Framework::Ignite {
            vec![
                (event_handler(hook.name, true), 11),
                (event_handler(hook.name, false), 10),
            ]
        } else {
            vec![(method_hook(hook.name), 11)]
        };
        // With autograd on the graph is kept (LS002); with it off a tensor per step is kept
        // (LS014, which leaves a tensor per epoch alone).
        let want: Vec<(usize, &str)> = match (hook.grad, hook.grain) {
            (true, _) => vec![(0, "LS002")],
            (false, Grain::Step) => vec![(0, "LS014")],
            (false, Grain::Epoch) => vec![],
        };
        for (source, line) in cases {
            let want: Vec<(usize, String)> =
                want.iter().map(|(_, r)| (line, r.to_string())).collect();
            let grain = cadence_of(&source, "keep").or_else(|| cadence_of(&source, hook.name));
            if grain != Some(hook.grain) {
                failures.push(format!(
                    "{:?} {}: runs every {grain:?}, the table says {:?}",
                    hook.framework, hook.name, hook.grain
                ));
            }
            let got = found(&source, SourceKind::Python);
            if got != want {
                failures.push(format!(
                    "{:?} {}: expected {want:?}, found {got:?}\n{source}",
                    hook.framework, hook.name
                ));
            }
        }
    }
    // The same method under a name no framework calls runs when the user says.
    let got = found(&method_hook("summarize"), SourceKind::Python);
    if !got.is_empty() {
        failures.push(format!("`summarize` is no hook, found {got:?}"));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
