//! Every dialect's request builder against arbitrary input: contexts of any shape (any
//! roles, blocks, unicode with control characters, odd ids and media types, tool inputs of
//! any JSON), odd model ids and options out of every range. Whatever comes in, building
//! must not panic; it either refuses with a typed error or gives a request whose body is
//! JSON, whose URL has no space or control character, whose headers cannot inject a
//! line (no CR or LF in any name or value), and whose credentials are marked sensitive and
//! found nowhere else; and some requests of every dialect are built, not only refused.
//! The inputs and the checks are the test kit's, which users run on their own formats
//! (`omni_testkit::check::wire::check_requests`); this runs them many more times than the
//! kit's default, against each dialect's own provider.

use omni_protocol::{Catalogue, Dialect};
use omni_testkit::check::wire::check_requests;
use omni_testkit::check::Config;

#[test]
fn any_input_builds_a_sound_request_or_a_typed_refusal() {
    let catalogue = Catalogue::builtin().expect("the built-in catalogue");
    for dialect in Dialect::ALL {
        let id = match dialect {
            Dialect::AnthropicMessages => "anthropic",
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => "openai",
            Dialect::GoogleGemini => "google",
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => "ollama",
        };
        let provider = catalogue.provider(id).cloned().unwrap_or_else(|| panic!("provider {id}"));
        // 1,500 cases over the five dialects, as before the kit.
        let config = Config::new().cases(300).provider(provider);
        check_requests(dialect, &config).unwrap_or_else(|failure| panic!("{failure}"));
    }
}
