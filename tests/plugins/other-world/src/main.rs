//! A `wasi:cli/command` component: a valid component of another world.

fn main() {
    println!("not a nuon plugin");
}
