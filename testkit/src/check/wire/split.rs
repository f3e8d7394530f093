//! Split invariance: a body gives the same events however a network splits it.

use omni_protocol::Dialect;
use proptest::prelude::*;

use super::{decode, difference, well_formed, Decoded};
use crate::check::{run, strategy, Check, CheckFailure, Config, Sample};

/// The cut points where a decoder is most easily caught out, all at once: inside every
/// multi-byte UTF-8 character, between every CR and the LF after it, and right after
/// every line break (where a frame ends and the next begins).
pub fn awkward_cuts(body: &[u8]) -> Vec<usize> {
    let mut cuts = Vec::new();
    for (at, &byte) in body.iter().enumerate() {
        // A continuation byte (10xxxxxx) after the first byte of a character: a cut
        // before it falls inside the character.
        let inside_char = byte & 0xC0 == 0x80 && at > 0;
        let inside_crlf = byte == b'\n' && at > 0 && body[at - 1] == b'\r';
        let after_break = at > 0 && body[at - 1] == b'\n';
        if inside_char || inside_crlf || after_break {
            cuts.push(at);
        }
    }
    cuts
}

/// Each sample decodes without a panic and well formed ([`well_formed`]) when fed whole,
/// and gives the very same events and response fed one byte at a time, split at its
/// [`awkward_cuts`], and split at `config.cases` generated sets of points.
pub fn check_splits(dialect: Dialect, samples: &[Sample], config: &Config) -> Result<(), CheckFailure> {
    let subject = dialect.name();
    let fail = |case: String, detail: String| CheckFailure::new(Check::Splits, subject, case, detail);
    let mut wholes = Vec::with_capacity(samples.len());
    for sample in samples {
        let whole = decode(dialect, &config.model_id, &sample.body, &[])
            .map_err(|p| fail(format!("sample `{}`, fed whole", sample.name), p.to_string()))?;
        well_formed(&sample.body, &whole)
            .map_err(|e| fail(format!("sample `{}`, fed whole", sample.name), format!("ill-formed: {e}")))?;
        let bytewise: Vec<usize> = (1..sample.body.len()).collect();
        let awkward = awkward_cuts(&sample.body);
        for (how, cuts) in [("fed one byte at a time", &bytewise), ("split at its awkward points", &awkward)] {
            let case = || format!("sample `{}`, {how} ({} pieces)", sample.name, cuts.len() + 1);
            let split =
                decode(dialect, &config.model_id, &sample.body, cuts).map_err(|p| fail(case(), p.to_string()))?;
            if let Some(diff) = difference(&whole, &split, "in pieces:") {
                return Err(fail(case(), diff));
            }
        }
        wholes.push(whole);
    }
    if samples.is_empty() {
        return Ok(());
    }
    let cases = (0..samples.len()).prop_flat_map(|i| (Just(i), strategy::cut_points(samples[i].body.len(), 16)));
    run(
        config,
        cases,
        |(i, cuts)| {
            let sample = &samples[i];
            let case = || format!("sample `{}`, split at {cuts:?}", sample.name);
            let split =
                decode(dialect, &config.model_id, &sample.body, &cuts).map_err(|p| fail(case(), p.to_string()))?;
            match difference(&wholes[i], &split, "in pieces:") {
                Some(diff) => Err(fail(case(), diff)),
                None => Ok(()),
            }
        },
        |why| fail("generated splits".into(), why),
    )
}

/// The decode of a sample, for the other checks: a panic is a failure of `check`.
pub(super) fn decode_whole(
    dialect: Dialect,
    sample: &Sample,
    config: &Config,
    check: Check,
) -> Result<Decoded, CheckFailure> {
    decode(dialect, &config.model_id, &sample.body, &[]).map_err(|p| {
        CheckFailure::new(check, dialect.name(), format!("sample `{}`, fed whole", sample.name), p.to_string())
    })
}
