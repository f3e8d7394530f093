//! Cut streams: a connection that drops mid-body must never look like a complete answer.

use omni_protocol::Dialect;
use proptest::prelude::*;

use super::split::decode_whole;
use super::{decode, ending, well_formed, Decoded};
use crate::check::{clip, run, Check, CheckFailure, Config, Ending, Sample};

/// Every prefix of each sample shorter than it decodes without a panic and well formed,
/// and is not passed off as complete: when the whole sample ends in `Done`, a prefix that
/// ends in `Done` too has the whole's content and stop reason ([`Ending::Marked`]) or a
/// prefix of its content ([`Ending::Unmarked`]). Samples longer than
/// [`Config::every_prefix_up_to`] are cut around every line break (just before, on and
/// just after it, and mid-line) and at `config.cases` generated points.
pub fn check_cuts(dialect: Dialect, samples: &[Sample], config: &Config) -> Result<(), CheckFailure> {
    let ending = ending(dialect, config);
    let mut wholes = Vec::with_capacity(samples.len());
    for sample in samples {
        let whole = decode_whole(dialect, sample, config, Check::Cuts)?;
        for cut in fixed_cuts(&sample.body, config.every_prefix_up_to) {
            check_cut(dialect, sample, &whole, cut, ending, config)?;
        }
        wholes.push(whole);
    }
    let long: Vec<usize> = (0..samples.len()).filter(|&i| samples[i].body.len() > config.every_prefix_up_to).collect();
    if long.is_empty() {
        return Ok(());
    }
    let cases = proptest::sample::select(long).prop_flat_map(|i| (Just(i), 0..samples[i].body.len()));
    run(
        config,
        cases,
        |(i, cut)| check_cut(dialect, &samples[i], &wholes[i], cut, ending, config),
        |why| CheckFailure::new(Check::Cuts, dialect.name(), "generated cuts", why),
    )
}

/// Where a sample is cut without generating: everywhere when it is short, else around
/// each line break.
fn fixed_cuts(body: &[u8], every_up_to: usize) -> Vec<usize> {
    if body.len() <= every_up_to {
        return (0..body.len()).collect();
    }
    let mut cuts = vec![0];
    let mut line_start = 0;
    for (at, _) in body.iter().enumerate().filter(|(_, &b)| b == b'\n') {
        cuts.extend([(line_start + at) / 2, at.saturating_sub(1), at, at + 1]);
        line_start = at + 1;
    }
    cuts.retain(|&c| c < body.len());
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn check_cut(
    dialect: Dialect,
    sample: &Sample,
    whole: &Decoded,
    cut: usize,
    ending: Ending,
    config: &Config,
) -> Result<(), CheckFailure> {
    let prefix = &sample.body[..cut];
    let case = || {
        let tail = String::from_utf8_lossy(&prefix[cut.saturating_sub(24)..]).into_owned();
        format!("sample `{}` cut after {cut} of {} bytes (ending …{tail:?})", sample.name, sample.body.len())
    };
    let fail = |detail: String| CheckFailure::new(Check::Cuts, dialect.name(), case(), detail);
    let decoded = decode(dialect, &config.model_id, prefix, &[]).map_err(|p| fail(p.to_string()))?;
    well_formed(prefix, &decoded).map_err(|e| fail(format!("ill-formed: {e}")))?;
    if !(whole.is_done() && decoded.is_done()) {
        return Ok(());
    }
    let (cut_response, response) = (&decoded.response, &whole.response);
    match ending {
        Ending::Marked => {
            if (&cut_response.message.content, cut_response.stop_reason)
                != (&response.message.content, response.stop_reason)
            {
                return Err(fail(format!(
                    "the cut stream passed for complete (Done, stop reason {:?}) with other content than the whole \
                     (stop reason {:?}):\n    cut:   {}\n    whole: {}",
                    cut_response.stop_reason,
                    response.stop_reason,
                    clip(&format!("{:?}", cut_response.message.content), 300),
                    clip(&format!("{:?}", response.message.content), 300),
                )));
            }
        }
        Ending::Unmarked => {
            let (cut_text, text) = (cut_response.text(), response.text());
            if !text.starts_with(&cut_text) || cut_response.message.content.len() > response.message.content.len() {
                return Err(fail(format!(
                    "the cut stream ended Done with content that is not a prefix of the whole's:\n    cut:   {}\n    \
                     whole: {}",
                    clip(&cut_text, 200),
                    clip(&text, 200)
                )));
            }
        }
    }
    Ok(())
}
