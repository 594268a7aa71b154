//! `tandem proxy`: serves Redis clients on a local port (crates/proxy) until killed.

use std::time::Duration;

use tandem_proxy::{Proxy, ProxyConfig};

use crate::Failure;
use crate::cli::ProxyArgs;

pub fn run(args: &ProxyArgs) -> Result<(), Failure> {
    if args.exit_on_stdin_eof {
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            std::process::exit(0);
        });
    }
    let config = ProxyConfig {
        cluster: args.cluster.0.clone(),
        listen: args.listen,
        group: args.group,
        deadline: Duration::from_millis(args.deadline_ms),
        read_consistency: args.reads,
    };
    let proxy = Proxy::start(config).map_err(|err| Failure::Run(err.to_string()))?;
    // One line once it listens: scripts and the demo wait for it.
    println!("tandem proxy: listening on {}", proxy.local_addr());
    loop {
        std::thread::park();
    }
}
