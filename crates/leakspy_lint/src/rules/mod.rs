//! One file per rule; this module only routes the checker's events to them. Each rule checks
//! `checker.enabled(...)` itself through the `dispatch!` lines below.

use ruff_python_ast::{ExprCall, Stmt, StmtClassDef, StmtFunctionDef};

use crate::checker::Checker;
use crate::registry::Rule;

pub mod helpers;
pub(crate) mod ls001_accumulate_graph_tensor;
pub(crate) mod ls002_store_graph_tensor;
pub(crate) mod ls003_clone_is_not_detach;
pub(crate) mod ls004_device_tensor_history;
pub(crate) mod ls005_view_retains_base;
pub(crate) mod ls006_hook_retains_activation;
pub(crate) mod ls007_module_state_retains_graph;
pub(crate) mod ls008_recurrent_state_carry;
pub(crate) mod ls009_grad_enabled_eval_loop;
pub(crate) mod ls010_self_referential_history;
pub(crate) mod ls011_running_stat_graph;
pub(crate) mod ls012_unclosed_figure;
pub(crate) mod ls013_strong_ref_cache;
pub(crate) mod ls014_unbounded_history;
pub(crate) mod ls015_retained_module_copies;
pub(crate) mod ls016_notebook_output_keeps_graph;
pub(crate) mod ls101_empty_cache_in_loop;
pub(crate) mod ls102_gc_collect_in_loop;
pub(crate) mod ls103_useless_del;
pub(crate) mod ls104_per_step_allocation;

/// Before a statement runs (the environment does not yet include its effects).
pub(crate) fn analyze_stmt(checker: &mut Checker, stmt: &Stmt) {
    // Most rules report only what runs once per training iteration: elsewhere they have nothing
    // to say, and asking them would be wasted work.
    let per_iteration = checker.iteration().is_some();
    if runs(checker, Rule::LS001, per_iteration) {
        ls001_accumulate_graph_tensor::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS002, per_iteration) {
        ls002_store_graph_tensor::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS003, per_iteration) {
        ls003_clone_is_not_detach::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS004, per_iteration) {
        ls004_device_tensor_history::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS005, per_iteration) {
        ls005_view_retains_base::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS006, per_iteration) {
        ls006_hook_retains_activation::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS007, per_iteration) {
        ls007_module_state_retains_graph::stmt(checker, stmt);
    }
    if checker.enabled(Rule::LS008) {
        ls008_recurrent_state_carry::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS009, per_iteration) {
        ls009_grad_enabled_eval_loop::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS010, per_iteration) {
        ls010_self_referential_history::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS011, per_iteration) {
        ls011_running_stat_graph::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS012, per_iteration) {
        ls012_unclosed_figure::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS013, per_iteration) {
        ls013_strong_ref_cache::stmt(checker, stmt);
    }
    // A cell's result, kept by the kernel whatever runs per iteration.
    if checker.enabled(Rule::LS016) {
        ls016_notebook_output_keeps_graph::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS014, per_iteration) {
        ls014_unbounded_history::stmt(checker, stmt);
    }
    if runs(checker, Rule::LS015, per_iteration) {
        ls015_retained_module_copies::stmt(checker, stmt);
    }
    if checker.enabled(Rule::LS103) {
        ls103_useless_del::stmt(checker, stmt);
    }
}

/// Each call expression of a statement, before the statement runs; only for statements that
/// run once per training iteration (every call rule needs one).
pub(crate) fn analyze_call(checker: &mut Checker, call: &ExprCall, stmt: &Stmt) {
    if checker.enabled(Rule::LS002) {
        ls002_store_graph_tensor::call(checker, call);
    }
    if checker.enabled(Rule::LS003) {
        ls003_clone_is_not_detach::call(checker, call);
    }
    if checker.enabled(Rule::LS004) {
        ls004_device_tensor_history::call(checker, call);
    }
    if checker.enabled(Rule::LS005) {
        ls005_view_retains_base::call(checker, call);
    }
    if checker.enabled(Rule::LS006) {
        ls006_hook_retains_activation::call(checker, call);
    }
    if checker.enabled(Rule::LS009) {
        ls009_grad_enabled_eval_loop::call(checker, call);
    }
    if checker.enabled(Rule::LS011) {
        ls011_running_stat_graph::call(checker, call);
    }
    if checker.enabled(Rule::LS012) {
        ls012_unclosed_figure::call(checker, call, stmt);
    }
    if checker.enabled(Rule::LS013) {
        ls013_strong_ref_cache::call(checker, call);
    }
    if checker.enabled(Rule::LS014) {
        ls014_unbounded_history::call(checker, call);
    }
    if checker.enabled(Rule::LS015) {
        ls015_retained_module_copies::call(checker, call);
    }
    if checker.enabled(Rule::LS101) {
        ls101_empty_cache_in_loop::call(checker, call, stmt);
    }
    if checker.enabled(Rule::LS102) {
        ls102_gc_collect_in_loop::call(checker, call, stmt);
    }
    if checker.enabled(Rule::LS104) {
        ls104_per_step_allocation::call(checker, call);
    }
}

/// Is the rule enabled, and can it report here (where nothing runs once per training iteration,
/// only LS008 and LS103 can)?
fn runs(checker: &Checker, rule: Rule, per_iteration: bool) -> bool {
    checker.enabled(rule) && (per_iteration || matches!(rule, Rule::LS008 | Rule::LS103))
}

/// On entering a loop (its frame is already pushed, its body not yet walked).
pub(crate) fn analyze_loop(checker: &mut Checker, stmt: &Stmt) {
    if checker.enabled(Rule::LS009) {
        ls009_grad_enabled_eval_loop::on_loop(checker, stmt);
    }
}

/// On entering a function (its scope is pushed, parameters bound, body not yet walked).
pub(crate) fn analyze_function(checker: &mut Checker, def: &StmtFunctionDef) {
    if checker.enabled(Rule::LS013) {
        ls013_strong_ref_cache::function(checker, def);
    }
}

/// On entering a class body.
pub(crate) fn analyze_class(_checker: &mut Checker, _class: &StmtClassDef) {}
