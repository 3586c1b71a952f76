//! Resolving dotted names through the file's imports, and the torch/numpy/matplotlib facts the
//! analysis needs about them.

use ruff_python_ast::{Expr, Stmt};
use rustc_hash::FxHashMap;

/// Maps a local alias to the full dotted path it stands for (`F` -> `torch.nn.functional`).
#[derive(Debug, Default, Clone)]
pub struct Imports {
    aliases: FxHashMap<String, String>,
}

impl Imports {
    pub fn collect(suite: &[Stmt]) -> Self {
        let mut imports = Imports::default();
        for stmt in suite {
            imports.add(stmt);
        }
        imports
    }

    /// Records one import statement; imports inside functions count too (they are common in
    /// training scripts that import lazily).
    pub fn add(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Import(import) => {
                for alias in &import.names {
                    let full = alias.name.as_str();
                    match &alias.asname {
                        Some(asname) => {
                            self.aliases
                                .insert(asname.as_str().to_string(), full.to_string());
                        }
                        None => {
                            let head = full.split('.').next().unwrap_or(full);
                            self.aliases.insert(head.to_string(), head.to_string());
                        }
                    }
                }
            }
            Stmt::ImportFrom(from) => {
                // A relative import keeps its dots (`from .metrics import Metric` ->
                // `.metrics.Metric`): the project index resolves it against the importing
                // module's package; no library name starts with a dot.
                let dots = ".".repeat(from.level as usize);
                let module = match &from.module {
                    Some(m) => format!("{dots}{}.", m.as_str()),
                    None if from.level > 0 => dots,
                    None => return,
                };
                for alias in &from.names {
                    let local = alias.asname.as_ref().unwrap_or(&alias.name).as_str();
                    self.aliases.insert(
                        local.to_string(),
                        format!("{module}{}", alias.name.as_str()),
                    );
                }
            }
            _ => {}
        }
    }

    /// The qualified dotted name of a name/attribute chain, resolving the head through imports
    /// and the community's conventional aliases when the file does not import them itself.
    pub fn qualify(&self, expr: &Expr) -> Option<String> {
        let mut len = 0;
        let mut cur = expr;
        let head = loop {
            match cur {
                Expr::Attribute(attr) => {
                    len += attr.attr.len() + 1;
                    cur = &attr.value;
                }
                Expr::Name(name) => break name.id.as_str(),
                _ => return None,
            }
        };
        let resolved = match self.aliases.get(head) {
            Some(full) => full.as_str(),
            None => match head {
                "nn" => "torch.nn",
                "F" => "torch.nn.functional",
                "np" => "numpy",
                "plt" => "matplotlib.pyplot",
                "optim" => "torch.optim",
                _ => head,
            },
        };
        // Every call of every file is qualified: one exact allocation, no list of parts.
        fn push_chain(expr: &Expr, head: &str, out: &mut String) {
            match expr {
                Expr::Attribute(attr) => {
                    push_chain(&attr.value, head, out);
                    out.push('.');
                    out.push_str(attr.attr.as_str());
                }
                _ => out.push_str(head),
            }
        }
        let mut out = String::with_capacity(resolved.len() + len);
        push_chain(expr, resolved, &mut out);
        Some(out)
    }
}

/// The plain dotted text of a name/attribute chain (`self.actor.net`), no resolution.
pub fn dotted(expr: &Expr) -> Option<String> {
    // Asked of nearly every expression the analysis meets: sized once, filled once.
    let len = dotted_len(expr)?;
    let mut out = String::with_capacity(len);
    push_dotted(expr, &mut out);
    Some(out)
}

fn dotted_len(expr: &Expr) -> Option<usize> {
    match expr {
        Expr::Name(name) => Some(name.id.len()),
        Expr::Attribute(attr) => Some(dotted_len(&attr.value)? + 1 + attr.attr.len()),
        _ => None,
    }
}

fn push_dotted(expr: &Expr, out: &mut String) {
    match expr {
        Expr::Name(name) => out.push_str(name.id.as_str()),
        Expr::Attribute(attr) => {
            push_dotted(&attr.value, out);
            out.push('.');
            out.push_str(attr.attr.as_str());
        }
        _ => {}
    }
}

/// Is the expression the name/attribute chain `key`? `dotted(expr) == Some(key)` without
/// building the string.
pub fn is_dotted(expr: &Expr, key: &str) -> bool {
    match expr {
        Expr::Name(name) => name.id.as_str() == key,
        Expr::Attribute(attr) => {
            let name = attr.attr.as_str();
            key.len() > name.len() + 1
                && key.ends_with(name)
                && key.as_bytes()[key.len() - name.len() - 1] == b'.'
                && is_dotted(&attr.value, &key[..key.len() - name.len() - 1])
        }
        _ => false,
    }
}

/// Last segment of a qualified name.
pub fn last_segment(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// Functions of `torch.nn.functional` that compute a loss.
pub fn is_functional_loss(qualified: &str) -> bool {
    let Some(func) = qualified.strip_prefix("torch.nn.functional.") else {
        return false;
    };
    func.ends_with("_loss")
        || matches!(
            func,
            "cross_entropy"
                | "binary_cross_entropy"
                | "binary_cross_entropy_with_logits"
                | "kl_div"
                | "nll_loss"
                | "mse_loss"
                | "l1_loss"
                | "smooth_l1_loss"
                | "huber_loss"
                | "cosine_embedding_loss"
                | "ctc_loss"
                | "triplet_margin_loss"
        )
}

/// `torch.*` functions whose result carries no autograd graph whatever their inputs.
pub fn torch_function_cuts(func: &str) -> bool {
    matches!(
        func,
        "argmax"
            | "argmin"
            | "argsort"
            | "argwhere"
            | "nonzero"
            | "count_nonzero"
            | "histc"
            | "multinomial"
            | "numel"
            | "is_tensor"
            | "is_grad_enabled"
            | "no_grad"
            | "inference_mode"
            | "enable_grad"
            | "set_grad_enabled"
            | "manual_seed"
            | "save"
            | "load"
            | "equal"
            | "allclose"
            | "isclose"
            | "isnan"
            | "isinf"
            | "isfinite"
            | "eq"
            | "ne"
            | "lt"
            | "le"
            | "gt"
            | "ge"
            | "sign"
            | "bucketize"
            | "searchsorted"
            | "randint"
            | "randperm"
            | "arange"
            | "zeros_like"
            | "ones_like"
            | "empty_like"
            | "full_like"
            | "randn_like"
            | "rand_like"
            | "device"
            | "dtype"
            | "Size"
            | "get_default_dtype"
            | "cuda"
    )
}

/// Tensor methods that return a number, a shape or a flag about the tensor (`x.numel()`,
/// `x.element_size()`, `x.item()`), whatever the receiver: their result holds no tensor.
pub fn tensor_method_counts(method: &str) -> bool {
    matches!(
        method,
        "item"
            | "size"
            | "dim"
            | "ndimension"
            | "numel"
            | "nelement"
            | "element_size"
            | "stride"
            | "storage_offset"
            | "data_ptr"
            | "get_device"
            | "is_contiguous"
    )
}

/// Tensor methods whose result carries no autograd graph (it is cut, or the result is an
/// integer/bool tensor or a plain Python value).
pub fn tensor_method_cuts(method: &str) -> bool {
    tensor_method_counts(method)
        || matches!(
            method,
            "tolist"
                | "detach"
                | "detach_"
                | "numpy"
                | "argmax"
                | "argmin"
                | "argsort"
                | "nonzero"
                | "count_nonzero"
                | "histc"
                | "multinomial"
                | "long"
                | "int"
                | "bool"
                | "short"
                | "byte"
                | "char"
                | "eq"
                | "ne"
                | "lt"
                | "le"
                | "gt"
                | "ge"
                | "isnan"
                | "isinf"
                | "isfinite"
                | "equal"
                | "allclose"
                | "any"
                | "all"
                | "backward"
                | "register_hook"
                | "type"
                | "__len__"
                | "keys"
                | "count"
                | "index"
                | "zero_"
        )
}

/// Tensor attributes that carry no graph.
pub fn tensor_attr_cuts(attr: &str) -> bool {
    // `indices` of what `max(dim)`, `topk` or `sort` return: positions, never a graph.
    matches!(
        attr,
        "data"
            | "shape"
            | "dtype"
            | "device"
            | "requires_grad"
            | "grad"
            | "grad_fn"
            | "is_leaf"
            | "ndim"
            | "indices"
            | "is_cuda"
            | "layout"
            | "names"
    )
}

/// Tensor methods that keep the graph while looking like a copy or snapshot.
pub fn is_snapshot_method(method: &str) -> bool {
    matches!(
        method,
        "clone" | "cpu" | "to" | "cuda" | "float" | "double" | "half" | "contiguous" | "copy"
    )
}

/// Builtins whose result is a plain Python value.
pub fn builtin_cuts(func: &str) -> bool {
    matches!(
        func,
        "float"
            | "int"
            | "bool"
            | "len"
            | "str"
            | "repr"
            | "round"
            | "print"
            | "isinstance"
            | "hasattr"
            | "getattr"
            | "id"
            | "hash"
            | "range"
            | "format"
            | "type"
            | "callable"
    )
}

/// Builtins that pass their argument's graph on (a container or an element of it).
pub fn builtin_passes(func: &str) -> bool {
    matches!(
        func,
        "sum"
            | "max"
            | "min"
            | "abs"
            | "list"
            | "tuple"
            | "sorted"
            | "reversed"
            | "iter"
            | "next"
            | "zip"
            | "enumerate"
            | "dict"
            | "set"
            | "frozenset"
    )
}

/// Context managers and decorators that turn autograd recording off.
pub fn disables_grad(qualified: &str) -> bool {
    matches!(last_segment(qualified), "no_grad" | "inference_mode")
        && (qualified.starts_with("torch") || !qualified.contains('.'))
}

/// Parameter names that, by near-universal convention, hold an `nn.Module`. Used only for
/// function parameters, whose type is otherwise unknown.
pub fn is_conventional_module_param(name: &str) -> bool {
    matches!(
        name,
        "model"
            | "net"
            | "network"
            | "module"
            | "actor"
            | "critic"
            | "policy"
            | "policy_net"
            | "target_net"
            | "q_net"
            | "qnet"
            | "value_net"
            | "encoder"
            | "decoder"
            | "generator"
            | "discriminator"
            | "backbone"
            | "teacher"
            | "student"
            | "classifier"
    )
}

/// Parameter names that conventionally hold a loss function.
pub fn is_conventional_loss_param(name: &str) -> bool {
    matches!(
        name,
        "criterion" | "loss_fn" | "loss_func" | "loss_function" | "loss_fct"
    )
}

impl Imports {
    /// Does an import bind the local name `name`?
    pub fn binds(&self, name: &str) -> bool {
        self.aliases.contains_key(name)
    }

    /// Every local name an import binds, with the dotted name it stands for.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Does the file bind some local name to `module` (or a submodule of it)?
    pub fn has_alias_for(&self, module: &str) -> bool {
        self.aliases.values().any(|full| {
            full == module || full.starts_with(module) && full[module.len()..].starts_with('.')
        })
    }
}

/// A name that says a running statistic: a mean, variance, standard deviation, Welford's `M2`,
/// an exponential moving average, a baseline, a moment, a smoothed value.
pub fn is_stat_name(name: &str) -> bool {
    let n = name.trim_start_matches('_').to_ascii_lowercase();
    n == "m2"
        || n.starts_with("m2_")
        || [
            "mean", "var", "std", "ema", "running", "avg", "average", "baseline", "moment",
            "smooth",
        ]
        .iter()
        .any(|s| n.contains(s))
}

/// Tensor methods and torch functions that return `(values, indices)`: the values keep the
/// input's graph, the indices never carry one. `max`, `min` and `median` do when given a
/// dimension (with another tensor, `max` is elementwise and returns one tensor, which is
/// never unpacked into two).
pub fn returns_values_and_indices(method: &str, nargs: usize) -> bool {
    match method {
        "topk" | "sort" | "kthvalue" | "mode" | "cummax" | "cummin" => true,
        "max" | "min" | "median" | "nanmedian" => nargs > 0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{dotted, is_dotted};

    fn expr(src: &str) -> ruff_python_ast::Expr {
        *ruff_python_parser::parse_expression(src)
            .unwrap()
            .into_syntax()
            .body
    }

    #[test]
    fn is_dotted_agrees_with_dotted() {
        let cases = [
            ("self.actor.net", "self.actor.net", true),
            ("self.actor.net", "self.actor", false),
            ("self.actor.net", "actor.net", false),
            ("self.actor.net", "xself.actor.net", false),
            ("self.actor.net", "self_actor.net", false),
            ("losses", "losses", true),
            ("losses", "loss", false),
            ("a.b", "b", false),
            ("f(x).y", "f(x).y", false),
            ("x[0]", "x", false),
        ];
        for (src, key, want) in cases {
            let e = expr(src);
            assert_eq!(is_dotted(&e, key), want, "{src} vs {key}");
            assert_eq!(dotted(&e).as_deref() == Some(key), want, "{src} vs {key}");
        }
        assert_eq!(dotted(&expr("self.actor.net")).unwrap().capacity(), 14);
    }
}
