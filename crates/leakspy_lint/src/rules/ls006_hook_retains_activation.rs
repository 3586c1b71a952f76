//! PLACEHOLDER: to be written (What it does / Why is this bad? / Example / Use instead / Fix safety).

#![allow(unused)]
use ruff_python_ast::{ExprCall, Stmt, StmtFunctionDef};

use crate::checker::Checker;

pub(crate) fn stmt(_checker: &mut Checker, _stmt: &Stmt) {}
pub(crate) fn call(_checker: &mut Checker, _call: &ExprCall) {}
