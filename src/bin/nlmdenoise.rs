fn main() {
    eprintln!("nlmdenoise: command-line tool not written yet");
    std::process::exit(2);
}
