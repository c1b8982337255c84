//! The model a variant names: built in (`oracle`, `sim`), a provider model
//! (`openai:…`, `anthropic:…`), either wrapped in `chaos(...)`, or a
//! recorded trial's answers (`tack replay`). Provider models of one run share
//! rate limiters, and every model is priced from the dated price table.

use tack_agent::Pricer;
use tack_model::{ChaosModel, Model, ReplayModel, TaskBrief, builtin_model, unwrap_chaos};
use tack_providers::{PriceTable, ProviderConfig, RateLimiters, RateLimits, cost, provider_model};
use tack_suite::Variant;

use crate::TrialSpec;

/// What all trials of a run share.
pub(crate) struct Shared {
    pub limiters: RateLimiters,
    pub prices: PriceTable,
}

/// A price file whose entries override the built-in table's.
pub const PRICES_ENV: &str = "TACK_PRICES";

impl Shared {
    pub fn new() -> Result<Shared, String> {
        Ok(Shared {
            limiters: RateLimiters::default(),
            prices: price_table()?,
        })
    }
}

/// The built-in dated price table, with the entries of `$TACK_PRICES`
/// (same format) laid over it when set.
pub fn price_table() -> Result<PriceTable, String> {
    let builtin = PriceTable::builtin().clone();
    match std::env::var_os(PRICES_ENV) {
        None => Ok(builtin),
        Some(path) => {
            let path = std::path::PathBuf::from(path);
            let overrides = PriceTable::load(&path)
                .map_err(|e| format!("{PRICES_ENV}={}: {e}", path.display()))?;
            builtin
                .with_overrides(&overrides)
                .map_err(|e| format!("{PRICES_ENV}={}: {e}", path.display()))
        }
    }
}

pub(crate) fn build_model(
    shared: &Shared,
    variant: &Variant,
    brief: TaskBrief,
    spec: &TrialSpec,
) -> Result<Box<dyn Model>, String> {
    if let Some(recorded) = &spec.replay {
        return Ok(Box::new(ReplayModel::new(
            &recorded.model,
            recorded.answers.clone(),
        )));
    }
    let (chaos, inner) = unwrap_chaos(&variant.model);
    let model = if tack_model::is_builtin_model(inner) {
        builtin_model(inner, brief, variant.sim, spec.seed).map_err(|e| e.to_string())?
    } else {
        let config = provider_config(shared, variant, inner)?;
        provider_model(inner, &config).map_err(|e| e.to_string())?
    };
    Ok(if chaos {
        Box::new(ChaosModel::new(model, variant.chaos, spec.seed))
    } else {
        model
    })
}

/// Checks before the run starts that the variant's model can be built: a
/// known built-in model, or a provider model whose key (unless it is on
/// loopback) and base URL are in order — so a missing key fails at once,
/// not in every trial.
pub(crate) fn check_model(variant: &Variant) -> Result<(), String> {
    let (_, inner) = unwrap_chaos(&variant.model);
    if tack_model::is_builtin_model(inner) {
        return Ok(());
    }
    let config = provider_config(&Shared::new()?, variant, inner)?;
    provider_model(inner, &config)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The provider connection a variant describes, with the run's shared limiter.
pub(crate) fn provider_config(
    shared: &Shared,
    variant: &Variant,
    spec: &str,
) -> Result<ProviderConfig, String> {
    let settings = &variant.provider;
    let mut config = ProviderConfig::from_spec(spec).map_err(|e| e.to_string())?;
    config.base_url = settings.base_url.clone();
    config.api_key_env = settings.api_key_env.clone();
    config.stream = settings.stream;
    config.max_tokens = settings.max_tokens;
    let limits = RateLimits {
        requests_per_minute: settings.requests_per_minute,
        tokens_per_minute: settings.tokens_per_minute,
        max_concurrency: settings.max_concurrency,
    };
    config.rate_limiter = Some(
        shared
            .limiters
            .get(config.provider, config.base_url(), limits),
    );
    Ok(config)
}

/// Prices a variant's calls, when the table knows its model; unknown models
/// stay unpriced (cost `None`), never 0.
pub(crate) fn pricer(shared: &Shared, variant: &Variant) -> Option<Pricer> {
    pricer_in(&shared.prices, &variant.model)
}

/// The price table's pricer for a model id (`chaos(...)` unwrapped).
pub fn pricer_for_model(model: &str) -> Result<Option<Pricer>, String> {
    Ok(pricer_in(&price_table()?, model))
}

fn pricer_in(prices: &PriceTable, model: &str) -> Option<Pricer> {
    let (_, inner) = unwrap_chaos(model);
    let (_, price) = prices.lookup(inner)?;
    let price = *price;
    Some(Box::new(move |usage| Some(cost(usage, &price))))
}
