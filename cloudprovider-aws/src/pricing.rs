//! Prices: on-demand from the AWS Pricing API (GetProducts), falling back to the bundled
//! us-east-1 table of the catalogue when the API is disabled or fails; spot from
//! DescribeSpotPriceHistory (the newest price per type and zone). Both are cached.

use crate::cache::{Clock, TtlCache};
use crate::error::AwsError;
use crate::settings::AwsSettings;
use karpenter_catalog::Catalogue;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// On-demand prices by instance type (USD per hour).
pub type OnDemandPrices = Arc<BTreeMap<String, f64>>;
/// Spot prices by (instance type, zone) (USD per hour).
pub type SpotPrices = Arc<BTreeMap<(String, String), f64>>;

/// The bundled on-demand table: the embedded catalogue's us-east-1 prices.
pub fn fallback_on_demand_prices() -> BTreeMap<String, f64> {
    Catalogue::embedded()
        .instance_types
        .iter()
        .filter(|e| e.on_demand_price_per_hour_usd > 0.0)
        .map(|e| (e.name.clone(), e.on_demand_price_per_hour_usd))
        .collect()
}

/// Extracts (instance type, USD per hour) from one Pricing API price-list document; `None`
/// when the document has no instance type or no positive USD on-demand price.
pub fn parse_price_list_item(json: &str) -> Option<(String, f64)> {
    let doc: serde_json::Value = serde_json::from_str(json).ok()?;
    let name = doc
        .pointer("/product/attributes/instanceType")?
        .as_str()?
        .to_string();
    let on_demand = doc.pointer("/terms/OnDemand")?.as_object()?;
    for term in on_demand.values() {
        let Some(dims) = term.get("priceDimensions").and_then(|d| d.as_object()) else {
            continue;
        };
        for dim in dims.values() {
            if let Some(price) = dim
                .pointer("/pricePerUnit/USD")
                .and_then(|p| p.as_str())
                .and_then(|p| p.parse::<f64>().ok())
                .filter(|p| *p > 0.0)
            {
                return Some((name, price));
            }
        }
    }
    None
}

/// The price cache.
#[derive(Debug)]
pub struct PricingProvider {
    ec2: aws_sdk_ec2::Client,
    pricing: aws_sdk_pricing::Client,
    region: String,
    use_pricing_api: bool,
    on_demand: TtlCache<(), OnDemandPrices>,
    spot: TtlCache<(), SpotPrices>,
    clock: Arc<dyn Clock>,
}

impl PricingProvider {
    /// Prices for `settings.region`: on-demand cached for `pricing_ttl`, spot for
    /// `instance_types_ttl`.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        pricing: aws_sdk_pricing::Client,
        settings: &AwsSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            ec2,
            pricing,
            region: settings.region.clone(),
            use_pricing_api: settings.pricing_api,
            on_demand: TtlCache::new(clock.clone(), settings.pricing_ttl),
            spot: TtlCache::new(clock.clone(), settings.instance_types_ttl),
            clock,
        }
    }

    /// On-demand prices. API failures are logged and the bundled table used, so launches
    /// never stop for want of a price list.
    pub async fn on_demand(&self) -> OnDemandPrices {
        if let Some(hit) = self.on_demand.get(&()) {
            return hit;
        }
        let mut prices = fallback_on_demand_prices();
        if self.use_pricing_api {
            match self.fetch_on_demand().await {
                Ok(fetched) if !fetched.is_empty() => prices.extend(fetched),
                Ok(_) => tracing::warn!("Pricing API returned no prices; using the bundled table"),
                Err(e) => tracing::warn!(error = %e, "Pricing API failed; using the bundled table"),
            }
        }
        let prices = Arc::new(prices);
        self.on_demand.insert((), prices.clone());
        prices
    }

    async fn fetch_on_demand(&self) -> Result<BTreeMap<String, f64>, AwsError> {
        use aws_sdk_pricing::types::{Filter, FilterType};
        let filter = |field: &str, value: &str| {
            Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
                .map_err(|e| AwsError::Invalid {
                    what: "pricing filter".into(),
                    message: e.to_string(),
                })
        };
        let filters = vec![
            filter("regionCode", &self.region)?,
            filter("operatingSystem", "Linux")?,
            filter("preInstalledSw", "NA")?,
            filter("tenancy", "Shared")?,
            filter("capacitystatus", "Used")?,
        ];
        let mut out = BTreeMap::new();
        let mut token = None;
        loop {
            let page = self
                .pricing
                .get_products()
                .service_code("AmazonEC2")
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("GetProducts", e))?;
            out.extend(
                page.price_list()
                    .iter()
                    .filter_map(|p| parse_price_list_item(p)),
            );
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// Spot prices: the newest Linux price per type and zone from the last day of history.
    pub async fn spot(&self) -> Result<SpotPrices, AwsError> {
        if let Some(hit) = self.spot.get(&()) {
            return Ok(hit);
        }
        let start = self.clock.now() - Duration::from_secs(24 * 60 * 60);
        let mut newest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
        let mut token = None;
        loop {
            let page = self
                .ec2
                .describe_spot_price_history()
                .product_descriptions("Linux/UNIX")
                .product_descriptions("Linux/UNIX (Amazon VPC)")
                .start_time(aws_sdk_ec2::primitives::DateTime::from(start))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeSpotPriceHistory", e))?;
            for p in page.spot_price_history() {
                let (Some(it), Some(zone), Some(price)) = (
                    p.instance_type(),
                    p.availability_zone(),
                    p.spot_price().and_then(|s| s.parse::<f64>().ok()),
                ) else {
                    continue;
                };
                let ts = p.timestamp().map_or(0, |t| t.secs());
                let key = (it.as_str().to_string(), zone.to_string());
                match newest.get(&key) {
                    Some((seen, _)) if *seen >= ts => {}
                    _ => {
                        newest.insert(key, (ts, price));
                    }
                }
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let prices: SpotPrices = Arc::new(newest.into_iter().map(|(k, (_, p))| (k, p)).collect());
        self.spot.insert((), prices.clone());
        Ok(prices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_price_list_document() {
        let doc = r#"{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"m5.large","regionCode":"us-east-1"}},
          "terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{"ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.0960000000"}}}}}}}"#;
        assert_eq!(
            parse_price_list_item(doc),
            Some(("m5.large".to_string(), 0.096))
        );
        let zero = doc.replace("0.0960000000", "0.0000000000");
        assert_eq!(parse_price_list_item(&zero), None);
        assert_eq!(parse_price_list_item("not json"), None);
        assert_eq!(parse_price_list_item(r#"{"terms":{}}"#), None);
    }

    #[test]
    fn fallback_table_has_catalogue_prices() {
        let t = fallback_on_demand_prices();
        assert_eq!(t.get("m5.large"), Some(&0.096));
        assert!(t.len() > 500, "{}", t.len());
    }
}
