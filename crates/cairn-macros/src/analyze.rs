//! Reading a tool function's signature: which parameters are injected, which go into the
//! schema, and what the function returns.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, Ident, Lit, Meta, Pat, PathArguments, ReturnType, Signature,
    Type, ext::IdentExt,
};

use crate::options::{Approval, ToolOptions};

/// The name of the injected context type.
const CONTEXT_TYPE: &str = "FunctionInvocationContext";

/// One parameter of a tool function, in order.
pub enum Param {
    /// The injected `FunctionInvocationContext`, passed by reference or cloned.
    Context { by_ref: bool },
    /// The parsed explicit input (`#[tool(input = T)]`).
    Input { by_ref: bool },
    /// A field of the generated arguments struct.
    Field(Box<Field>),
}

/// A parameter that becomes a field of the arguments struct.
pub struct Field {
    /// The field's name (the parameter's name).
    pub ident: Ident,
    /// The field's type (`String` for `&str`, `Vec<T>` for `&[T]`, `T` for `&T`).
    pub ty: Type,
    /// Whether the function takes it by reference.
    pub by_ref: bool,
    /// Attributes moved onto the field: doc comments, `#[serde]`, `#[schemars]`.
    pub attrs: Vec<Attribute>,
    /// `#[default(expr)]`.
    pub default: Option<Expr>,
}

/// Everything the code generator needs to know about one tool function.
pub struct ToolFn {
    /// The tool's name.
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// Whether calls need approval.
    pub approval: Approval,
    /// `#[tool(input = T)]`.
    pub input: Option<Type>,
    /// The parameters, in order (the receiver excluded).
    pub params: Vec<Param>,
    /// Whether the return type is a `Result`.
    pub returns_result: bool,
    /// The span of the return type (or of the name when there is none).
    pub output_span: Span,
    /// Whether the function is `async`.
    pub is_async: bool,
}

/// Analyzes `sig` and strips from its parameters the attributes the macro consumes (doc
/// comments, `#[default]`, `#[serde]`, `#[schemars]`), which rustc would reject there.
pub fn analyze(
    options: ToolOptions,
    fn_attrs: &[Attribute],
    sig: &mut Signature,
) -> syn::Result<ToolFn> {
    let mut errors = Errors::default();

    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new(
            sig.generics.span(),
            "`#[tool]` functions cannot be generic: the tool's schema must be known",
        ));
    }
    if let syn::Safety::Unsafe(token) = &sig.safety {
        errors.push(syn::Error::new(
            token.span(),
            "`#[tool]` functions cannot be `unsafe`: the model calls them",
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new(
            v.span(),
            "`#[tool]` functions cannot be variadic",
        ));
    }

    let (name, name_span) = match &options.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (sig.ident.unraw().to_string(), sig.ident.span()),
    };
    if !is_valid_tool_name(&name) {
        errors.push(syn::Error::new(
            name_span,
            format!(
                "invalid tool name `{name}`: a tool name is 1 to 64 characters of `A-Z`, `a-z`, \
                 `0-9`, `_` or `-`; rename the function or set `#[tool(name = \"...\")]`"
            ),
        ));
    }

    let description = match &options.description {
        Some(lit) => lit.value(),
        None => match doc_text(fn_attrs) {
            Ok(text) => text,
            Err(e) => {
                errors.push(e);
                String::new()
            }
        },
    };

    let explicit_input = options.input.is_some();
    let mut params = Vec::new();
    let mut context_seen = false;
    for arg in sig.inputs.iter_mut() {
        let pat_type = match arg {
            FnArg::Receiver(_) => continue,
            FnArg::Typed(pt) => pt,
        };
        let named_ctx = matches!(&*pat_type.pat, Pat::Ident(pi) if pi.ident == "ctx");
        // `#[context]` marks the context parameter explicitly (for a type alias or a renamed
        // import, which a macro cannot resolve).
        let marked = pat_type.attrs.iter().any(|a| a.path().is_ident("context"));
        let context = match context_kind(&pat_type.ty) {
            Some(ContextKind::Mut) => {
                errors.push(syn::Error::new(
                    pat_type.ty.span(),
                    "the FunctionInvocationContext is passed by shared reference: write \
                     `&FunctionInvocationContext` (its session and kwargs are readable through it)",
                ));
                Some(true)
            }
            Some(ContextKind::Ref) => Some(true),
            Some(ContextKind::Value) => Some(false),
            None if marked || (explicit_input && named_ctx) => match &*pat_type.ty {
                Type::Reference(r) if r.mutability.is_some() => {
                    errors.push(syn::Error::new(
                        r.span(),
                        "the FunctionInvocationContext is passed by shared reference",
                    ));
                    Some(true)
                }
                Type::Reference(_) => Some(true),
                _ => Some(false),
            },
            None => None,
        };

        let mut kept = Vec::new();
        let mut moved = Vec::new();
        let mut default = None;
        for attr in std::mem::take(&mut pat_type.attrs) {
            let path = attr.path();
            if path.is_ident("context") {
                if !matches!(attr.meta, Meta::Path(_)) {
                    errors.push(syn::Error::new(attr.span(), "expected `#[context]`"));
                }
            } else if path.is_ident("doc") {
                moved.push(attr);
            } else if path.is_ident("serde") || path.is_ident("schemars") {
                if context.is_some() || explicit_input {
                    errors.push(syn::Error::new(
                        attr.span(),
                        "`#[serde]`/`#[schemars]` attributes apply only to parameters that are \
                         part of the generated schema",
                    ));
                }
                moved.push(attr);
            } else if path.is_ident("default") {
                if context.is_some() || explicit_input {
                    errors.push(syn::Error::new(
                        attr.span(),
                        "`#[default(...)]` applies only to parameters that are part of the \
                         generated schema",
                    ));
                    continue;
                }
                if default.is_some() {
                    errors.push(syn::Error::new(attr.span(), "`#[default]` is given twice"));
                    continue;
                }
                match attr.parse_args::<Expr>() {
                    Ok(e) => default = Some(e),
                    Err(_) => errors.push(syn::Error::new(
                        attr.span(),
                        "expected `#[default(expression)]`, e.g. `#[default(\"contoso\")]`",
                    )),
                }
            } else {
                kept.push(attr);
            }
        }
        pat_type.attrs = kept;

        if let Some(by_ref) = context {
            if context_seen {
                errors.push(syn::Error::new(
                    pat_type.span(),
                    "multiple FunctionInvocationContext parameters: a tool takes at most one \
                     injected context",
                ));
            }
            context_seen = true;
            params.push(Param::Context { by_ref });
            continue;
        }

        if explicit_input {
            if params.iter().any(|p| matches!(p, Param::Input { .. })) {
                errors.push(syn::Error::new(
                    pat_type.span(),
                    "with `#[tool(input = T)]` the function takes one parameter for the parsed \
                     input, plus optionally a context (a `&FunctionInvocationContext` or a \
                     reference named `ctx`)",
                ));
            }
            let by_ref = match &*pat_type.ty {
                Type::Reference(r) if r.mutability.is_none() => true,
                Type::Reference(r) => {
                    errors.push(syn::Error::new(
                        r.span(),
                        "the parsed input is passed by value or by shared reference",
                    ));
                    true
                }
                _ => false,
            };
            params.push(Param::Input { by_ref });
            continue;
        }

        let ident = match &*pat_type.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            other => {
                errors.push(syn::Error::new(
                    other.span(),
                    "a tool parameter must be a plain name (it becomes a property of the schema)",
                ));
                continue;
            }
        };
        let (ty, by_ref) = match field_type(&pat_type.ty) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        params.push(Param::Field(Box::new(Field {
            ident,
            ty,
            by_ref,
            attrs: moved,
            default,
        })));
    }

    if explicit_input && !params.iter().any(|p| matches!(p, Param::Input { .. })) {
        errors.push(syn::Error::new(
            sig.ident.span(),
            "with `#[tool(input = T)]` the function takes a parameter for the parsed input",
        ));
    }

    let (returns_result, output_span) = match &sig.output {
        ReturnType::Default => (false, sig.ident.span()),
        ReturnType::Type(_, ty) => (is_result(ty), ty.span()),
    };

    errors.finish()?;
    Ok(ToolFn {
        name,
        description,
        approval: options.approval.unwrap_or(Approval::Never),
        input: options.input,
        params,
        returns_result,
        output_span,
        is_async: sig.asyncness.is_some(),
    })
}

/// Whether `attr` is one the macro consumes on a parameter.
fn is_param_attr(attr: &Attribute) -> bool {
    let path = attr.path();
    ["doc", "serde", "schemars", "default", "context"]
        .iter()
        .any(|name| path.is_ident(name))
}

/// Removes the attributes the macro consumes from the parameters of `sig` (used when the
/// macro fails, so the function is still emitted without attributes rustc would reject).
pub fn strip_param_attrs(sig: &mut Signature) {
    for arg in sig.inputs.iter_mut() {
        if let FnArg::Typed(pt) = arg {
            pt.attrs.retain(|a| !is_param_attr(a));
        }
    }
}

/// The provider rule for tool names: 1 to 64 of `[A-Za-z0-9_-]` (as
/// `cairn_core::tool::is_valid_tool_name`).
fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The doc comment as one text: lines joined with newlines (one leading space of each line
/// removed, as rustdoc does), the whole trimmed.
pub fn doc_text(attrs: &[Attribute]) -> syn::Result<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        let Meta::NameValue(nv) = &attr.meta else {
            continue; // `#[doc(hidden)]` and the like
        };
        match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => {
                for line in s.value().split('\n') {
                    lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
                }
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "the tool description is taken from the doc comment, which must be literal \
                     text here; set `#[tool(description = \"...\")]` instead",
                ));
            }
        }
    }
    Ok(lines.join("\n").trim().to_owned())
}

enum ContextKind {
    Ref,
    Mut,
    Value,
}

/// Whether `ty` is `&FunctionInvocationContext`, `&mut …` or by value (any path ending in the
/// name, since a macro cannot resolve imports).
fn context_kind(ty: &Type) -> Option<ContextKind> {
    match peel(ty) {
        Type::Reference(r) if is_context_path(&r.elem) => Some(if r.mutability.is_some() {
            ContextKind::Mut
        } else {
            ContextKind::Ref
        }),
        t if is_context_path(t) => Some(ContextKind::Value),
        _ => None,
    }
}

fn is_context_path(ty: &Type) -> bool {
    match peel(ty) {
        Type::Path(tp) => {
            tp.path.segments.last().is_some_and(|s| {
                s.ident == CONTEXT_TYPE && matches!(s.arguments, PathArguments::None)
            })
        }
        _ => false,
    }
}

fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => peel(&p.elem),
        Type::Group(g) => peel(&g.elem),
        other => other,
    }
}

/// The field type of a schema parameter and whether the function takes it by reference.
fn field_type(ty: &Type) -> syn::Result<(Type, bool)> {
    match peel(ty) {
        Type::Reference(r) => {
            if r.mutability.is_some() {
                return Err(syn::Error::new(
                    r.span(),
                    "tool parameters are read from the model's arguments: take them by value or \
                     by shared reference",
                ));
            }
            let elem = peel(&r.elem);
            let owned: Type = match elem {
                Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident("str") => {
                    syn::parse_quote!(::std::string::String)
                }
                Type::Slice(s) => {
                    let inner = &s.elem;
                    syn::parse_quote!(::std::vec::Vec<#inner>)
                }
                other => other.clone(),
            };
            Ok((owned, true))
        }
        Type::ImplTrait(t) => Err(syn::Error::new(
            t.span(),
            "`impl Trait` parameters are not supported in tools: use a concrete type",
        )),
        other => Ok((other.clone(), false)),
    }
}

/// Whether the return type's last path segment is `Result`.
fn is_result(ty: &Type) -> bool {
    match peel(ty) {
        Type::Path(tp) => tp.path.segments.last().is_some_and(|s| s.ident == "Result"),
        _ => false,
    }
}

/// Collects errors so one compilation reports all of them.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error.
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// `Err` with every error pushed, if any.
    pub fn finish(self) -> syn::Result<()> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
