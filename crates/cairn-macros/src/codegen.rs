//! Generating the arguments struct and the `Tool` implementation of one tool function.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::{Expr, ExprLit, Lit};

use crate::analyze::{Param, ToolFn};
use crate::options::{Approval, Krate};

/// Where the generated `invoke` finds the function to call.
pub struct Target {
    /// The type that implements `Tool`.
    pub tool_ty: TokenStream,
    /// The path of the function to call, e.g. `send_email::call` or `<Db>::lookup`.
    pub callee: TokenStream,
    /// The receiver argument passed first (`&*self.0,`), if any.
    pub receiver: Option<TokenStream>,
    /// A prefix that makes the generated helper names unique in their scope.
    pub unique: String,
}

/// The items for one tool: the arguments struct, default functions, and `impl Tool`. They are
/// meant to be placed inside an anonymous `const _: () = { ... };` block.
pub fn tool_impl(krate: &Krate, tool: &ToolFn, target: &Target) -> TokenStream {
    let k = &krate.tokens;
    let serde_path = format!("{}::__private::serde", krate.string);
    let schemars_path = format!("{}::__private::schemars", krate.string);
    let args_ident = format_ident!("__CairnArgs_{}", target.unique);

    let mut defaults = Vec::new();
    let mut fields = Vec::new();
    let mut call_args = Vec::new();
    for param in &tool.params {
        match param {
            Param::Context { by_ref: true } => call_args.push(quote!(__ctx)),
            Param::Context { by_ref: false } => {
                call_args.push(quote!(::core::clone::Clone::clone(__ctx)))
            }
            Param::Input { by_ref: true } => call_args.push(quote!(&__input)),
            Param::Input { by_ref: false } => call_args.push(quote!(__input)),
            Param::Field(f) => {
                let ident = &f.ident;
                let ty = &f.ty;
                let attrs = &f.attrs;
                let serde_default = f.default.as_ref().map(|expr| {
                    let fn_ident = format_ident!("__cairn_default_{}_{}", target.unique, ident);
                    let fn_name = fn_ident.to_string();
                    let body = match expr {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(_), ..
                        }) => quote!(::core::convert::From::from(#expr)),
                        _ => quote!(#expr),
                    };
                    defaults.push(quote! {
                        #[allow(non_snake_case)]
                        fn #fn_ident() -> #ty { #body }
                    });
                    quote!(#[serde(default = #fn_name)])
                });
                fields.push(quote! {
                    #(#attrs)*
                    #serde_default
                    #ident: #ty
                });
                if f.by_ref {
                    call_args.push(quote!(&__args.#ident));
                } else {
                    call_args.push(quote!(__args.#ident));
                }
            }
        }
    }

    let (args_struct, schema_ty, parse) = match &tool.input {
        Some(input) => (
            quote!(),
            quote!(#input),
            quote! {
                let __input: #input = #k::tool::parse_arguments(__arguments)?;
            },
        ),
        None => (
            quote! {
                #[allow(non_camel_case_types, dead_code)]
                #[derive(#k::__private::serde::Deserialize, #k::__private::schemars::JsonSchema)]
                #[serde(crate = #serde_path)]
                #[schemars(crate = #schemars_path)]
                struct #args_ident {
                    #(#fields,)*
                }
            },
            quote!(#args_ident),
            quote! {
                let __args: #args_ident = #k::tool::parse_arguments(__arguments)?;
            },
        ),
    };

    let name = &tool.name;
    let description = &tool.description;
    let mode = match tool.approval {
        Approval::Always => quote!(AlwaysRequire),
        Approval::Never => quote!(NeverRequire),
    };
    let callee = &target.callee;
    let receiver = &target.receiver;
    let await_ = tool.is_async.then(|| quote!(.await));
    let span = tool.output_span;
    let convert = if tool.returns_result {
        quote_spanned!(span=> #k::tool::result_into_output(__out))
    } else {
        quote_spanned!(span=> ::core::result::Result::Ok(#k::IntoToolOutput::into_tool_output(__out)))
    };
    let tool_ty = &target.tool_ty;

    quote! {
        #args_struct
        #(#defaults)*

        #[automatically_derived]
        impl #k::Tool for #tool_ty {
            fn spec(&self) -> &#k::ToolSpec {
                static SPEC: ::std::sync::OnceLock<#k::ToolSpec> = ::std::sync::OnceLock::new();
                SPEC.get_or_init(|| {
                    let mut spec = #k::ToolSpec::new(
                        #name,
                        #description,
                        #k::schema::schema_for::<#schema_ty>(),
                    );
                    spec.approval_mode = #k::ApprovalMode::#mode;
                    spec
                })
            }

            fn invoke<'a>(
                &'a self,
                __ctx: &'a #k::FunctionInvocationContext,
            ) -> #k::BoxFuture<'a, ::core::result::Result<#k::ToolOutput, #k::ToolError>> {
                ::std::boxed::Box::pin(async move {
                    // A model may send `null` for a call without arguments.
                    let __empty = #k::__private::serde_json::Value::Object(
                        ::core::default::Default::default(),
                    );
                    let __arguments = if __ctx.arguments.is_null() {
                        &__empty
                    } else {
                        &__ctx.arguments
                    };
                    #parse
                    let __out = #callee(#receiver #(#call_args),*) #await_;
                    #convert
                })
            }
        }
    }
}
