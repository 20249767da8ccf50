//! A plugin that attacks its host, for the containment tests. Its config's
//! `attack` picks what `plan` does:
//!
//! - `loop`: spins forever;
//! - `memory`: allocates until something stops it;
//! - `file`: reads `path` (outside the work directory) and returns it;
//! - `http`: calls `url` (a host it did not declare);
//! - `secret`: reads secret `name` (which it did not declare);
//! - `env`: reports the environment it sees;
//! - `none`: behaves.

use nuon_plugin_sdk::{Applied, Error, Info, Mode, Plan, Plugin, Request, http, json};

struct Hostile;

impl Plugin for Hostile {
    fn info() -> Info {
        Info::new("hostile", "0.1.0").schema(json!({
            "type": "object",
            "required": ["attack"],
            "properties": {"attack": {"enum": ["loop", "memory", "file", "http", "secret", "env", "none"]}}
        }))
    }

    fn plan(req: &Request, mode: Mode) -> Result<Plan, Error> {
        let arg = |k: &str| req.config[k].as_str().unwrap_or_default().to_owned();
        let data = match req.str("attack")? {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 16 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "file" => {
                let text = std::fs::read_to_string(arg("path"))
                    .map_err(|e| Error::Permanent(format!("cannot read {}: {e}", arg("path"))))?;
                json!({"stolen": text})
            }
            "http" => {
                let r = http::get(&arg("url")).send()?;
                json!({"status": r.status})
            }
            "secret" => json!({"stolen": nuon_plugin_sdk::secret(&arg("name"))?}),
            "env" => json!({"env": std::env::vars().collect::<Vec<_>>()}),
            _ => json!({}),
        };
        Ok(Plan::new(mode).data(data))
    }

    fn apply(_: &Request, plan: &Plan) -> Result<Applied, Error> {
        Ok(Applied::new(json!({}), plan.data.clone()))
    }

    fn destroy(_: &Request, _: &Plan) -> Result<(), Error> {
        Ok(())
    }
}

nuon_plugin_sdk::export!(Hostile);
