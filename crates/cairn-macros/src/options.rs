//! The options of `#[tool(...)]` and the path of the cairn crate.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{LitStr, Type, meta::ParseNestedMeta};

/// Approval mode as written in the attribute.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Never,
    Always,
}

/// What `#[tool(...)]` says.
#[derive(Default)]
pub struct ToolOptions {
    /// `name = "..."`, with the literal for error spans.
    pub name: Option<LitStr>,
    /// `description = "..."`.
    pub description: Option<LitStr>,
    /// `approval_mode = "always_require" | "never_require"`.
    pub approval: Option<Approval>,
    /// `input = Type`.
    pub input: Option<Type>,
}

impl ToolOptions {
    /// Parses one `key = value` of the attribute.
    pub fn parse_meta(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "name" => {
                let lit: LitStr = meta.value()?.parse()?;
                set_once(&meta, &mut self.name, lit)
            }
            "description" => {
                let lit: LitStr = meta.value()?.parse()?;
                set_once(&meta, &mut self.description, lit)
            }
            "approval_mode" => {
                let lit: LitStr = meta.value()?.parse()?;
                let mode = match lit.value().as_str() {
                    "always_require" => Approval::Always,
                    "never_require" => Approval::Never,
                    other => {
                        return Err(syn::Error::new(
                            lit.span(),
                            format!(
                                "unknown approval_mode `{other}`: expected \"always_require\" or \"never_require\""
                            ),
                        ));
                    }
                };
                set_once(&meta, &mut self.approval, mode)
            }
            "input" => {
                let ty: Type = meta.value()?.parse()?;
                set_once(&meta, &mut self.input, ty)
            }
            _ => Err(meta.error(
                "unknown `#[tool]` option: expected `name = \"...\"`, `description = \"...\"`, \
                 `approval_mode = \"always_require\" | \"never_require\"` or `input = Type`",
            )),
        }
    }

    /// Parses the tokens inside `#[tool(...)]`.
    pub fn parse_tokens(tokens: TokenStream) -> syn::Result<Self> {
        let mut options = ToolOptions::default();
        if !tokens.is_empty() {
            let parser = syn::meta::parser(|meta| options.parse_meta(meta));
            syn::parse::Parser::parse2(parser, tokens)?;
        }
        Ok(options)
    }
}

fn set_once<T>(meta: &ParseNestedMeta<'_>, slot: &mut Option<T>, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(meta.error("this `#[tool]` option is given twice"));
    }
    *slot = Some(value);
    Ok(())
}

/// The path of the crate that holds `Tool`, as tokens and as a string (for `#[serde(crate)]`).
pub struct Krate {
    pub tokens: TokenStream,
    pub string: String,
}

/// Finds the cairn crate the caller depends on: the facade `cairn` if present, else
/// `cairn-core`, else `::cairn_core`.
pub fn krate() -> Krate {
    use proc_macro_crate::{FoundCrate, crate_name};
    for name in ["cairn", "cairn-core"] {
        match crate_name(name) {
            Ok(FoundCrate::Itself) => {
                return Krate {
                    tokens: quote!(crate),
                    string: "crate".to_owned(),
                };
            }
            Ok(FoundCrate::Name(n)) => {
                let ident = syn::Ident::new(&n, Span::call_site());
                return Krate {
                    tokens: quote!(::#ident),
                    string: format!("::{n}"),
                };
            }
            Err(_) => {}
        }
    }
    Krate {
        tokens: quote!(::cairn_core),
        string: "::cairn_core".to_owned(),
    }
}
