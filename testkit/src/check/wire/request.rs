//! Request building for any context and options: a typed refusal or a sound request,
//! never a panic, and the key only where it is marked secret.

use std::cell::{Cell, RefCell};

use omni_protocol::dialect::{HttpRequest, RequestSpec};
use omni_protocol::transport::is_secret_name;
use omni_protocol::{ApiKey, Catalogue, Dialect, Model, Provider};
use proptest::prelude::*;

use crate::check::{run, strategy, Check, CheckFailure, Config};

/// The key requests are built with: unusual enough that finding it anywhere is finding
/// the key.
const KEY: &str = "sk-omni-testkit-3f9c1e7a";

/// The checks every built request passes, `key` being the API key it was built with:
/// the body is JSON; the URL has no space or control character; no header name or value
/// holds a CR or LF (a line injected); a header named like a credential
/// ([`is_secret_name`]) or carrying the key is marked sensitive; the key is not in the
/// body, nor in the URL other than as a secret query parameter.
pub fn check_request(request: &HttpRequest, key: &str) -> Result<(), String> {
    serde_json::from_slice::<serde_json::Value>(&request.body).map_err(|e| format!("the body is not JSON: {e}"))?;
    if let Some(c) = request.url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("the URL holds {c:?}: {:?}", request.url));
    }
    for header in &request.headers {
        if header.name.contains(['\r', '\n']) || header.value.contains(['\r', '\n']) {
            return Err(format!("header {:?} could inject a line", header.name));
        }
        if !header.sensitive && is_secret_name(&header.name) {
            return Err(format!("header {:?} is named like a credential but not marked sensitive", header.name));
        }
        if !header.sensitive && !key.is_empty() && header.value.contains(key) {
            return Err(format!("header {:?} carries the API key but is not marked sensitive", header.name));
        }
    }
    if !key.is_empty() && request.body.windows(key.len()).any(|w| w == key.as_bytes()) {
        return Err("the API key is in the body".into());
    }
    if !key.is_empty() && request.url.contains(key) && !request.secret_query_values().any(|v| v.contains(key)) {
        return Err("the API key is in the URL, not as a secret query parameter".into());
    }
    Ok(())
}

/// Builds `config.cases` requests of `dialect` for generated model ids, contexts and
/// options ([`strategy::context`], [`strategy::options`]), with a key; each must be
/// refused with a typed error or pass [`check_request`], and some must be built (a
/// builder that refuses everything is not checked by refusing). The provider is
/// [`Config::provider`]'s or, by default, a built-in dialect's from the catalogue and, for
/// a format of yours, an OpenAI-compatible one with a bearer key.
pub fn check_requests(dialect: Dialect, config: &Config) -> Result<(), CheckFailure> {
    let subject = dialect.name();
    let fail = |case: String, detail: String| CheckFailure::new(Check::Requests, subject, case, detail);
    let provider = provider_for(dialect, config).map_err(|e| fail("choosing a provider".into(), e))?;
    let (built, refused) = (Cell::new(0usize), RefCell::new(None));
    let cases = (strategy::text(), any::<bool>(), strategy::context(), strategy::options());
    run(
        config,
        cases,
        |(model_id, reasoning, context, options)| {
            let mut model = Model::new(provider.id.clone(), model_id, dialect);
            model.reasoning = reasoning;
            let key = ApiKey::new(KEY);
            let spec = RequestSpec {
                model: &model,
                provider: &provider,
                context: &context,
                options: &options,
                api_key: Some(&key),
            };
            let case = || {
                let context = crate::check::clip(&serde_json::to_string(&context).unwrap_or_default(), 600);
                format!("model {:?}, context {context}, options {options:?}", model.id)
            };
            match crate::check::guarded(|| dialect.build_request(&spec)) {
                Err(panic) => Err(fail(case(), panic.to_string())),
                Ok(Ok(request)) => {
                    built.set(built.get() + 1);
                    check_request(&request.request, KEY).map_err(|e| fail(case(), e))
                }
                Ok(Err(error)) => {
                    refused.borrow_mut().get_or_insert_with(|| error.to_string());
                    Ok(())
                }
            }
        },
        |why| fail("generated contexts and options".into(), why),
    )?;
    if built.get() == 0 {
        let first = refused.into_inner().unwrap_or_default();
        return Err(fail(
            format!("{} generated contexts and options", config.cases),
            format!("every request was refused, so none could be checked; the first refusal: {first}"),
        ));
    }
    Ok(())
}

/// The provider requests of `dialect` are built for (see [`check_requests`]).
fn provider_for(dialect: Dialect, config: &Config) -> Result<Provider, String> {
    if let Some(provider) = &config.provider {
        return Ok(provider.clone());
    }
    if let Dialect::Custom(_) = dialect {
        let mut provider = Provider::openai_compatible("testkit", "https://provider.invalid/v1", Some("TESTKIT_KEY"));
        provider.dialect = dialect;
        return Ok(provider);
    }
    let catalogue = Catalogue::builtin().map_err(|e| format!("the built-in catalogue: {e}"))?;
    let found = catalogue.providers().find(|p| p.dialect == dialect).cloned();
    found.ok_or_else(|| format!("no provider of {} in the built-in catalogue", dialect.name()))
}
