use cairn_macros::{tool, tools};

struct Db;

#[tools]
impl Db {
    #[tool]
    fn by_value(self) -> String {
        String::new()
    }

    #[tool]
    fn no_receiver() -> String {
        String::new()
    }
}

struct Empty;

#[tools]
impl Empty {
    fn helper(&self) {}
}

struct Plain;

impl Plain {
    #[tool]
    fn method(&self) {}
}

fn main() {}
