//! hello-stream through omni-smol: one streamed reply from a Chat Completions server (the groq provider pointed at it) at
//! the given http URL, its text printed.
use omni_smol::Client;

fn main() {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8080".into());
    smol::block_on(async {
        let client = Client::builder().base_url("groq", format!("{url}/v1")).api_key("groq", "key").build();
        let stream =
            client.expect("a client").stream_text("groq:llama-3.1-8b-instant", "Say hello.");
        let mut stream = stream.expect("a stream");
        while let Some(text) = stream.next_text().await {
            print!("{text}");
        }
        println!();
        if let Err(e) = stream.response().await {
            eprintln!("{e}");
            std::process::exit(1);
        }
    });
}
