# Homebrew formula for redlock (Linux only: redlock relies on PR_SET_PDEATHSIG and Linux process
# groups). It builds from the source archive that packaging/release-archive.sh writes; that script
# also writes dist/redlock.rb, this file with version, url and sha256 filled in for the release.
class Redlock < Formula
  desc "Run a command under a Redis lock: one copy at a time across every machine"
  homepage "https://example.com/redlock"
  url "https://example.com/redlock/releases/redlock-0.4.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]

  depends_on "rust" => :build
  depends_on :linux

  def install
    system "cargo", "install", *std_cargo_args
    man1.install "man/redlock.1"
    bash_completion.install "completions/redlock.bash" => "redlock"
    zsh_completion.install "completions/_redlock"
    fish_completion.install "completions/redlock.fish"
  end

  test do
    assert_match "redlock #{version}", shell_output("#{bin}/redlock --version")
    # Nothing listens on port 1: redlock exits 69 and does not run the command.
    output = shell_output("#{bin}/redlock run --url redis://127.0.0.1:1 --key t -- touch ran 2>&1", 69)
    assert_match "redlock: ", output
    refute_path_exists testpath/"ran"
    assert_match "complete -F _redlock", shell_output("#{bin}/redlock completions bash")
  end
end
