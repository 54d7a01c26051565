//! Rust types as C type names, so that a C compiler can judge the loader's
//! signatures.

use super::{C_LAYOUTS, FUNCTION_ALIASES, INTEGER_ALIASES};
use std::collections::BTreeSet;

/// Type names that mean the same in both languages: the aliases and structs
/// compared above (so a wrong alias cannot hide behind its name).
pub fn known_c_types() -> BTreeSet<&'static str> {
    let aliases = INTEGER_ALIASES.iter().map(|&(name, ..)| name);
    let functions = FUNCTION_ALIASES.iter().map(|&(name, _)| name);
    let structs = C_LAYOUTS.iter().map(|layout| layout.name);
    aliases.chain(functions).chain(structs).collect()
}

/// The C type of a function pointer with these Rust parameter and return types.
pub fn c_function_pointer(
    parameters: &[&str],
    returns: &str,
    known: &BTreeSet<&str>,
) -> Result<String, String> {
    let parameters = parameters
        .iter()
        .map(|p| c_type(p, known))
        .collect::<Result<Vec<_>, _>>()?;
    let returns = if returns.is_empty() {
        "void".to_string()
    } else {
        c_type(returns, known)?
    };
    let parameters = if parameters.is_empty() {
        "void".to_string()
    } else {
        parameters.join(", ")
    };
    Ok(format!("__typeof__({returns} (*)({parameters}))"))
}

/// A Rust type as a C type name. Every result is usable as a declaration
/// specifier (wrapped in `__typeof__` where C's declarator syntax would
/// otherwise get in the way), so translations nest without precedence rules.
pub fn c_type(rust: &str, known: &BTreeSet<&str>) -> Result<String, String> {
    let mut parser = TypeParser {
        tokens: tokenize(rust),
        next: 0,
        known,
    };
    let c = parser.ty()?;
    match parser.peek() {
        None => Ok(c),
        Some(extra) => Err(format!("unexpected `{extra}` in `{rust}`")),
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut token = c.to_string();
        if c.is_alphanumeric() || c == '_' {
            while let Some(&next) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                token.push(next);
                chars.next();
            }
        } else if c == '"' {
            for next in chars.by_ref() {
                token.push(next);
                if next == '"' {
                    break;
                }
            }
        } else if (c == '-' && chars.peek() == Some(&'>'))
            || (c == ':' && chars.peek() == Some(&':'))
        {
            token.extend(chars.next());
        }
        tokens.push(token);
    }
    tokens
}

struct TypeParser<'a> {
    tokens: Vec<String>,
    next: usize,
    known: &'a BTreeSet<&'a str>,
}

impl TypeParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.next).map(String::as_str)
    }

    fn take(&mut self) -> Result<String, String> {
        let token = self
            .tokens
            .get(self.next)
            .cloned()
            .ok_or("unexpected end of type")?;
        self.next += 1;
        Ok(token)
    }

    fn expect(&mut self, expected: &str) -> Result<(), String> {
        match self.take()? {
            token if token == expected => Ok(()),
            token => Err(format!("expected `{expected}`, found `{token}`")),
        }
    }

    fn ty(&mut self) -> Result<String, String> {
        match self.take()?.as_str() {
            "*" => {
                let qualifier = match self.take()?.as_str() {
                    "mut" => "",
                    "const" => "const ",
                    other => {
                        return Err(format!(
                            "expected `mut` or `const` after `*`, found `{other}`"
                        ));
                    }
                };
                Ok(format!("__typeof__({qualifier}{} *)", self.ty()?))
            }
            // A nullable function pointer: C's function pointers are nullable anyway.
            "Option" => {
                self.expect("<")?;
                self.expect("unsafe")?;
                let function = self.function_pointer()?;
                self.expect(">")?;
                Ok(function)
            }
            "unsafe" => self.function_pointer(),
            name => self.named(name),
        }
    }

    /// The rest of `unsafe extern "C" fn(...) -> R`, after `unsafe`.
    fn function_pointer(&mut self) -> Result<String, String> {
        self.expect("extern")?;
        self.expect("\"C\"")?;
        self.expect("fn")?;
        self.expect("(")?;
        let mut parameters = Vec::new();
        while self.peek() != Some(")") {
            // An optional parameter name: `name: Type`.
            if self.tokens.get(self.next + 1).is_some_and(|t| t == ":") {
                self.next += 2;
            }
            parameters.push(self.ty()?);
            if self.peek() == Some(",") {
                self.next += 1;
            }
        }
        self.expect(")")?;
        let returns = if self.peek() == Some("->") {
            self.next += 1;
            self.ty()?
        } else {
            "void".to_string()
        };
        let parameters = if parameters.is_empty() {
            "void".to_string()
        } else {
            parameters.join(", ")
        };
        Ok(format!("__typeof__({returns} (*)({parameters}))"))
    }

    fn named(&self, name: &str) -> Result<String, String> {
        let primitive = match name {
            "u8" => "uint8_t",
            "u16" => "uint16_t",
            "u32" => "uint32_t",
            "u64" => "uint64_t",
            "i8" => "int8_t",
            "i16" => "int16_t",
            "i32" => "int32_t",
            "i64" => "int64_t",
            "usize" => "size_t",
            "isize" => "ptrdiff_t",
            "bool" => "_Bool",
            "c_char" => "char",
            "c_int" => "int",
            "c_uint" => "unsigned int",
            "c_void" => "void",
            _ if self.known.contains(name) => name,
            _ => {
                return Err(format!(
                    "`{name}` is neither a primitive nor a type this test compares with C \
                     (add it to INTEGER_ALIASES, FUNCTION_ALIASES or layout.rs)"
                ));
            }
        };
        Ok(primitive.to_string())
    }
}

#[test]
fn rust_types_translate_to_c() {
    let known = known_c_types();
    let translate = |rust| c_type(rust, &known).unwrap();
    assert_eq!(translate("u64"), "uint64_t");
    assert_eq!(
        translate("*mut *const c_char"),
        "__typeof__(__typeof__(const char *) *)"
    );
    assert_eq!(
        translate(
            "Option<unsafe extern \"C\" fn(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t>"
        ),
        "__typeof__(hsa_status_t (*)(hsa_agent_t, __typeof__(void *)))",
    );
    assert_eq!(
        translate("unsafe extern \"C\" fn()"),
        "__typeof__(void (*)(void))"
    );
    assert!(c_type("String", &known).is_err());
    assert!(c_type("u32 u32", &known).is_err());
}
