fn main() {
    std::process::exit(ferret::cli::main());
}
