//! # cairn-macros
//!
//! The `#[tool]` and `#[tools]` attribute macros of cairn (re-exported by the `cairn` crate):
//! tools from ordinary Rust functions and methods, after Microsoft Agent Framework's `@tool`.
//!
//! `#[tool]` turns a function into a unit struct of the same name that implements `Tool`, so
//! the function itself is what an agent is given. Its schema comes from the signature and the
//! doc comments; a `&FunctionInvocationContext` parameter is injected at call time and never
//! appears in the schema.
//!
//! ```
//! use cairn_core::{FunctionInvocationContext, Tool};
//! use cairn_macros::tool;
//!
//! /// Queue an email.
//! #[tool(approval_mode = "never_require")]
//! fn send_email(
//!     /// Recipient email address.
//!     address: String,
//!     ctx: &FunctionInvocationContext,
//! ) -> String {
//!     let user_id = ctx.kwargs.get_str("user_id").unwrap_or("?");
//!     let tenant = ctx.kwargs.get_str("tenant").unwrap_or("default");
//!     format!("Queued email for {address} from {user_id} ({tenant})")
//! }
//!
//! let spec = send_email.spec();
//! assert_eq!(spec.name, "send_email");
//! assert_eq!(spec.description, "Queue an email.");
//! assert_eq!(spec.parameters["required"], serde_json::json!(["address"]));
//! // `Agent::builder(client).tool(send_email)`; the body stays callable:
//! # let ctx = FunctionInvocationContext::new(std::sync::Arc::new(send_email), "c1", serde_json::json!({}));
//! assert!(send_email::call("a@example.com".into(), &ctx).starts_with("Queued"));
//! ```
//!
//! ## `#[tool]` on a function
//!
//! Options, all optional: `#[tool(name = "x", description = "...", approval_mode =
//! "always_require" | "never_require", input = Type)]`.
//!
//! - **Name**: the function's name, or `name = "..."`; it must match `[A-Za-z0-9_-]{1,64}`
//!   (checked at compile time).
//! - **Description**: the whole doc comment of the function (lines joined with newlines,
//!   trimmed), or `description = "..."`; `""` without either.
//! - **Parameters** become the properties of the arguments object. A `///` comment on a
//!   parameter is its description; `Option<T>` parameters are optional; any type that derives
//!   `Deserialize + JsonSchema` works (enums give an `enum` schema); `#[default(expr)]` gives a
//!   default (used when the model leaves the argument out, and shown in the schema);
//!   `#[serde(...)]` and `#[schemars(...)]` attributes on a parameter are applied to its field.
//!   `&str`, `&[T]` and `&T` parameters are parsed as `String`, `Vec<T>` and `T`.
//! - **Context**: a parameter whose type is `&FunctionInvocationContext` (any path ending in
//!   that name, any parameter name) is injected and left out of the schema. At most one. A
//!   macro cannot resolve type aliases or renamed imports: mark such a parameter `#[context]`.
//! - **Explicit input**: with `input = T` (`T: Deserialize + JsonSchema`) the schema is `T`'s and
//!   the function takes the parsed `T` plus optionally the context; a reference parameter named
//!   `ctx` is then injected as the context whatever its type is spelled.
//! - **Return value**: a `Result<T, E>` (`T: IntoToolOutput`, `E: Display`) becomes the tool's
//!   output or a `ToolError`; any other `T: IntoToolOutput` is the output. Bad arguments give
//!   `ToolError::InvalidArguments`.
//! - **The original function** stays callable as `name::call(...)`, with the same parameters
//!   and async-ness. (Inside its own body, call it recursively through `name::call` too.)
//!
//! ## `#[tools]` on an `impl` block
//!
//! Marks the `&self` methods that carry `#[tool]` (same options) as tools sharing the value,
//! and implements `ToolSet` for the type, so long-lived dependencies live on the value:
//!
//! ```
//! use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
//! use cairn_core::ToolSet;
//! use cairn_macros::tools;
//!
//! struct Counter { n: AtomicU32 }
//!
//! #[tools]
//! impl Counter {
//!     /// Add to the counter.
//!     #[tool]
//!     fn add(&self, by: u32) -> u32 {
//!         self.n.fetch_add(by, Ordering::SeqCst) + by
//!     }
//!
//!     /// Read the counter.
//!     #[tool(name = "read_counter")]
//!     async fn read(&self) -> u32 {
//!         self.n.load(Ordering::SeqCst)
//!     }
//! }
//!
//! let tools = Arc::new(Counter { n: AtomicU32::new(0) }).tools();
//! let names: Vec<_> = tools.iter().map(|t| t.spec().name.clone()).collect();
//! assert_eq!(names, ["add", "read_counter"]);
//! ```
//!
//! The generated code names the cairn crate through `proc-macro-crate`: `cairn` when the caller
//! depends on the facade, `cairn_core` otherwise.

mod analyze;
mod codegen;
mod options;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{ImplItem, Item, Meta, ReceiverKind, ext::IdentExt};

use analyze::{Errors, analyze, strip_param_attrs};
use codegen::{Target, tool_impl};
use options::{ToolOptions, krate};

/// Turns a `fn` or `async fn` into a tool: a unit struct of the same name implementing
/// `cairn_core::Tool`, with the original body callable as `name::call(...)`.
///
/// See the [crate documentation](crate) for the options and parameter rules.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand_tool(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// On an inherent `impl Type { ... }` block: each `&self` method marked `#[tool]` becomes a
/// tool holding an `Arc<Type>`, and `Type` implements `cairn_core::ToolSet`
/// (`Arc::new(value).tools()`).
///
/// See the [crate documentation](crate).
#[proc_macro_attribute]
pub fn tools(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand_tools(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_tool(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let item_fn = match syn::parse2::<Item>(item)? {
        Item::Fn(f) => f,
        other => {
            return Err(syn::Error::new(
                other.span(),
                "`#[tool]` goes on a `fn` or `async fn` (for methods, put `#[tools]` on the \
                 `impl` block and `#[tool]` on the methods)",
            ));
        }
    };
    let syn::ItemFn {
        attrs,
        vis,
        mut sig,
        block,
        ..
    } = item_fn;
    let analyzed = match sig.receiver() {
        Some(receiver) => Err(syn::Error::new(
            receiver.span(),
            "`#[tool]` on a method needs `#[tools]` on its `impl` block",
        )),
        None => ToolOptions::parse_tokens(attr).and_then(|o| analyze(o, &attrs, &mut sig)),
    };
    let tool = match analyzed {
        Ok(tool) => tool,
        Err(e) => {
            // Keep the function (without the attributes rustc rejects on parameters) so the
            // only errors are the macro's own.
            strip_param_attrs(&mut sig);
            let e = e.to_compile_error();
            return Ok(quote!(#e #(#attrs)* #vis #sig #block));
        }
    };

    let ident = sig.ident.clone();
    let mut call_sig = sig;
    call_sig.ident = syn::Ident::new("call", ident.span());
    let cfgs: Vec<_> = attrs.iter().filter(|a| a.path().is_ident("cfg")).collect();
    let docs: Vec<_> = attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let fn_attrs: Vec<_> = attrs.iter().filter(|a| !a.path().is_ident("cfg")).collect();

    let k = krate();
    let target = Target {
        tool_ty: quote!(#ident),
        callee: quote!(#ident::call),
        receiver: None,
        unique: ident.unraw().to_string(),
    };
    let imp = tool_impl(&k, &tool, &target);
    Ok(quote! {
        #(#cfgs)*
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #ident;

        #(#cfgs)*
        impl #ident {
            #(#fn_attrs)*
            #vis #call_sig #block
        }

        #(#cfgs)*
        const _: () = {
            #imp
        };
    })
}

fn is_tool_attr(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "tool")
}

fn expand_tools(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    if !attr.is_empty() {
        return Err(syn::Error::new(
            attr.span(),
            "`#[tools]` takes no options: put them on each `#[tool(...)]` method",
        ));
    }
    let mut imp = match syn::parse2::<Item>(item)? {
        Item::Impl(imp) => imp,
        other => {
            return Err(syn::Error::new(
                other.span(),
                "`#[tools]` goes on an inherent `impl Type { ... }` block",
            ));
        }
    };
    if let Some((path, _)) = &imp.trait_ {
        return Err(syn::Error::new(
            path.span(),
            "`#[tools]` goes on an inherent `impl Type { ... }` block, not a trait impl",
        ));
    }
    if !imp.generics.params.is_empty() || imp.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            imp.generics.span(),
            "`#[tools]` does not support generic impl blocks",
        ));
    }

    let k = krate();
    let self_ty = imp.self_ty.clone();
    let mut errors = Errors::default();
    let mut generated = Vec::new();
    let mut structs = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for item in imp.items.iter_mut() {
        let ImplItem::Fn(f) = item else { continue };
        let Some(pos) = f.attrs.iter().position(is_tool_attr) else {
            continue;
        };
        let attr = f.attrs.remove(pos);
        if let Some(again) = f.attrs.iter().find(|a| is_tool_attr(a)) {
            errors.push(syn::Error::new(again.span(), "`#[tool]` is given twice"));
            continue;
        }
        let options = match &attr.meta {
            Meta::Path(_) => Ok(ToolOptions::default()),
            Meta::List(list) => ToolOptions::parse_tokens(list.tokens.clone()),
            Meta::NameValue(nv) => Err(syn::Error::new(
                nv.span(),
                "expected `#[tool]` or `#[tool(option = value, ...)]`",
            )),
        };
        let options = match options {
            Ok(o) => o,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let receiver_ok = f.sig.receiver().is_some_and(|r| {
            r.mutability.is_none() && matches!(r.kind, ReceiverKind::Reference(_, _, None))
        });
        if !receiver_ok {
            let span = f
                .sig
                .receiver()
                .map_or_else(|| f.sig.ident.span(), |r| r.self_token.span);
            errors.push(syn::Error::new(
                span,
                "a `#[tool]` method in `#[tools]` takes `&self` (the tools share the value \
                 through an `Arc`)",
            ));
            continue;
        }
        let tool = match analyze(options, &f.attrs, &mut f.sig) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if names.contains(&tool.name) {
            errors.push(syn::Error::new(
                f.sig.ident.span(),
                format!(
                    "two tools in this `#[tools]` block are named `{}`",
                    tool.name
                ),
            ));
            continue;
        }
        names.push(tool.name.clone());

        let method = f.sig.ident.clone();
        let unique = method.unraw().to_string();
        let struct_ident = format_ident!("__CairnTool_{}", unique);
        let target = Target {
            tool_ty: quote!(#struct_ident),
            callee: quote!(<#self_ty>::#method),
            receiver: Some(quote!(&*self.0,)),
            unique,
        };
        let body = tool_impl(&k, &tool, &target);
        generated.push(quote! {
            #[allow(non_camel_case_types)]
            struct #struct_ident(::std::sync::Arc<#self_ty>);
            #body
        });
        structs.push(struct_ident);
    }
    if let Err(e) = errors.finish() {
        for item in imp.items.iter_mut() {
            if let ImplItem::Fn(f) = item {
                strip_param_attrs(&mut f.sig);
            }
        }
        let e = e.to_compile_error();
        return Ok(quote!(#e #imp));
    }
    if structs.is_empty() {
        return Err(syn::Error::new(
            imp.self_ty.span(),
            "`#[tools]` found no `#[tool]` methods in this impl block",
        ));
    }

    let kt = &k.tokens;
    Ok(quote! {
        #imp

        const _: () = {
            #(#generated)*

            #[automatically_derived]
            impl #kt::ToolSet for #self_ty {
                fn tools(self: ::std::sync::Arc<Self>) -> ::std::vec::Vec<#kt::SharedTool> {
                    ::std::vec![
                        #(::std::sync::Arc::new(#structs(::std::sync::Arc::clone(&self))) as #kt::SharedTool),*
                    ]
                }
            }
        };
    })
}
