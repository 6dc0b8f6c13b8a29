//! Rewrites the committed completions and man page from the CLI definitions: run it through
//! `scripts/gen-docs.sh` after changing `src/cli/`, and commit the result.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (path, bytes) in redlock::cli::docs::generated_files() {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("generated files live in a folder"))?;
        std::fs::write(&path, bytes)?;
        println!(
            "wrote {}",
            path.strip_prefix(root).unwrap_or(&path).display()
        );
    }
    Ok(())
}
