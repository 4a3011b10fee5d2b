//! [`SdkMetrics`]: an AWS SDK interceptor that measures every API call the provider makes,
//! what upstream's SDK middleware (github.com/jonathan-innis/aws-sdk-go-prometheus) measures
//! for the `aws_sdk_go_request_*` families: per call, its service, action, final HTTP status
//! code, duration and retry count; per attempt, its status code and duration. Each finished
//! call goes to the [`ProviderObserver`] in the shared slot as one [`ApiRequest`].

use crate::observe::{ApiAttempt, ApiRequest, ObserverSlot};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
    FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use std::time::Instant;

/// The status code recorded when an attempt got no HTTP response (as upstream: `-1`).
pub const NO_RESPONSE: i32 = -1;

/// The interceptor; every client built by [`crate::settings::AwsClients`] carries one over
/// the clients' shared slot, so an observer set later sees every client's calls.
#[derive(Debug, Clone)]
pub struct SdkMetrics {
    slot: ObserverSlot,
}

impl SdkMetrics {
    /// An interceptor reporting to whatever observer `slot` holds (nothing while empty).
    pub fn new(slot: ObserverSlot) -> Self {
        Self { slot }
    }
}

/// When the call started (per-operation state in the config bag).
#[derive(Debug, Clone)]
struct CallStart(Instant);

impl Storable for CallStart {
    type Storer = StoreReplace<Self>;
}

/// The current attempt's start and the attempts finished so far.
#[derive(Debug, Clone, Default)]
struct Attempts {
    current: Option<Instant>,
    done: Vec<ApiAttempt>,
}

impl Storable for Attempts {
    type Storer = StoreReplace<Self>;
}

fn status_of(context: &FinalizerInterceptorContextRef<'_>) -> i32 {
    context
        .response()
        .map_or(NO_RESPONSE, |r| i32::from(r.status().as_u16()))
}

impl Intercept for SdkMetrics {
    fn name(&self) -> &'static str {
        "karpenter-sdk-metrics"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(CallStart(Instant::now()));
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut attempts = cfg.load::<Attempts>().cloned().unwrap_or_default();
        attempts.current = Some(Instant::now());
        cfg.interceptor_state().store_put(attempts);
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut attempts = cfg.load::<Attempts>().cloned().unwrap_or_default();
        if let Some(started) = attempts.current.take() {
            attempts.done.push(ApiAttempt {
                code: status_of(context),
                duration: started.elapsed(),
            });
        }
        cfg.interceptor_state().store_put(attempts);
        Ok(())
    }

    fn read_after_execution(
        &self,
        _context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(observer) = self.slot.get() else {
            return Ok(());
        };
        let (service, action) = cfg
            .load::<Metadata>()
            .map(|m| (m.service().to_string(), m.name().to_string()))
            .unwrap_or_default();
        let attempts = cfg.load::<Attempts>().cloned().unwrap_or_default().done;
        let request = ApiRequest {
            service,
            action,
            // Upstream labels the call with its last attempt's code (0 without attempts).
            code: attempts.last().map_or(0, |a| a.code),
            duration: cfg
                .load::<CallStart>()
                .map(|s| s.0.elapsed())
                .unwrap_or_default(),
            attempts,
        };
        observer.api_request(&request);
        Ok(())
    }
}
