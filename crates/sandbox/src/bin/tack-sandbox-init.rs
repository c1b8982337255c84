//! A trial's sandbox init: small, so exec'ing it once per trial is cheap.
//! tack uses it when it lies beside tack's binary and is of the same build
//! (otherwise tack serves as its own init); other programs name it in
//! `TACK_SANDBOX_INIT`.

fn main() {
    tack_sandbox::serve_init_if_asked();
    eprintln!(
        "tack-sandbox-init is started by tack (first argument {}), not by hand",
        tack_sandbox::INIT_ARG
    );
    std::process::exit(2)
}
