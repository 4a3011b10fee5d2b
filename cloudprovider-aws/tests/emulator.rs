//! End-to-end tests against the moto AWS emulator. Start it with
//! `export KARPENTER_AWS_TEST_ENDPOINT=$(scripts/aws-emulator.sh start)`; without the
//! variable every test prints a notice and passes without doing anything.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use karpenter_cloudprovider::v1::{NodeClaim, NodeClaimSpec, StatusConditions};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_cloudprovider_aws::batcher::BatchOptions;
use karpenter_cloudprovider_aws::batcher::ec2::BatchWindows;
use karpenter_cloudprovider_aws::instance_profile::{self, InstanceProfile};
use karpenter_cloudprovider_aws::instance_status::{InstanceStatusWatcher, StatusCategory};
use karpenter_cloudprovider_aws::interruption::{
    ChannelSink, InterruptionKind, InterruptionSink, NodeClaimInterruption, SinkError, samples,
};
use karpenter_cloudprovider_aws::nodeclass::{EC2NodeClass, from_yaml};
use karpenter_cloudprovider_aws::observe::{ApiRequest, LaunchFailure, ProviderObserver};
use karpenter_cloudprovider_aws::tagging;
use karpenter_cloudprovider_aws::{
    AwsClients, AwsCloudProvider, AwsSettings, InterruptionPoller, ManualClock,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REGION: &str = "us-east-1";

fn endpoint(test: &str) -> Option<String> {
    match std::env::var("KARPENTER_AWS_TEST_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        // In CI the README's test command always starts the emulator; a missing endpoint
        // there means these tests silently stopped running, which must fail loudly.
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "{test}: KARPENTER_AWS_TEST_ENDPOINT is unset under CI; run the suite with bash scripts/test.sh"
        ),
        _ => {
            eprintln!(
                "SKIPPED {test}: KARPENTER_AWS_TEST_ENDPOINT is unset (start the emulator with scripts/aws-emulator.sh start)"
            );
            None
        }
    }
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{nanos}")
}

fn tag_spec(resource: ResourceType, key: &str, value: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .tags(Tag::builder().key(key).value(value).build())
        .build()
}

/// A VPC with two tagged subnets (us-east-1a, us-east-1b), a tagged security group, and the
/// alias SSM parameters pointing at real moto images, all named after `cluster`.
struct Fixture {
    clients: AwsClients,
    settings: AwsSettings,
    cluster: String,
    amd64_image: String,
}

async fn fixture(endpoint: &str, test: &str) -> Fixture {
    let clients = AwsClients::for_endpoint(endpoint, REGION).await;
    let cluster = unique(test);
    let ec2 = &clients.ec2;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_string();
    for (i, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        ec2.create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(format!("10.20.{i}.0/24"))
            .availability_zone(*zone)
            .tag_specifications(tag_spec(
                ResourceType::Subnet,
                "karpenter.sh/discovery",
                &cluster,
            ))
            .send()
            .await
            .expect("CreateSubnet");
    }
    ec2.create_security_group()
        .group_name(format!("{cluster}-nodes"))
        .description("nodes")
        .vpc_id(&vpc_id)
        .tag_specifications(tag_spec(
            ResourceType::SecurityGroup,
            "karpenter.sh/discovery",
            &cluster,
        ))
        .send()
        .await
        .expect("CreateSecurityGroup");
    let images = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    let pick = |arch: &str| {
        images
            .images()
            .iter()
            .find(|i| i.architecture().map(|a| a.as_str()) == Some(arch))
            .and_then(|i| i.image_id())
            .map(str::to_string)
    };
    let amd64_image = pick("x86_64").expect("an x86_64 image in moto");
    create_role(&clients, &format!("KarpenterNodeRole-{cluster}")).await;
    let mut settings = AwsSettings::new(&cluster, REGION);
    settings.cluster_endpoint = "https://cluster.example.com".into();
    settings.ssm_prefix = format!("/{cluster}");
    settings.pricing_api = false;
    for (arch, image) in [
        ("x86_64", Some(amd64_image.clone())),
        ("arm64", pick("arm64")),
    ] {
        let Some(image) = image else { continue };
        clients
            .ssm
            .put_parameter()
            .name(format!(
                "/{cluster}/eks/optimized-ami/{}/amazon-linux-2023/{arch}/standard/recommended/image_id",
                settings.kubernetes_version
            ))
            .value(image)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("PutParameter");
    }
    Fixture {
        clients,
        settings,
        cluster,
        amd64_image,
    }
}

/// Creates the IAM role `name`, which EC2 may assume (a node role).
async fn create_role(clients: &AwsClients, name: &str) {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    clients
        .iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .send()
        .await
        .expect("CreateRole");
}

/// The UID the fixture's EC2NodeClass carries (managed instance profiles are keyed by it).
fn uid(cluster: &str) -> String {
    format!("{cluster}-uid")
}

/// The managed instance profile name for `role` of the fixture's class.
fn managed_profile(cluster: &str, role: &str) -> String {
    instance_profile::profile_name(cluster, REGION, "default", &uid(cluster), role)
}

/// How many launch templates the provider created for the fixture's cluster.
async fn launch_templates(f: &Fixture) -> usize {
    cluster_templates(f).await.len()
}

/// The launch templates the provider created for the fixture's cluster.
async fn cluster_templates(f: &Fixture) -> Vec<aws_sdk_ec2::types::LaunchTemplate> {
    f.clients
        .ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag:karpenter.k8s.aws/cluster")
                .values(&f.cluster)
                .build(),
        )
        .send()
        .await
        .expect("DescribeLaunchTemplates")
        .launch_templates()
        .to_vec()
}

fn node_class(cluster: &str) -> EC2NodeClass {
    from_yaml(&format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  uid: {cluster}-uid
spec:
  role: KarpenterNodeRole-{cluster}
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: {cluster}
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: {cluster}
  tags:
    team: platform
"#
    ))
    .expect("node class parses")
}

fn claim(name: &str, requirements: serde_json::Value) -> NodeClaim {
    let spec: NodeClaimSpec = serde_json::from_value(serde_json::json!({
        "requirements": requirements,
        "nodeClassRef": { "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default" },
        "resources": { "requests": { "cpu": "1", "memory": "1Gi" } }
    }))
    .expect("claim spec");
    let mut c = NodeClaim::new(name, spec);
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "general".to_string())].into());
    c
}

async fn ready_provider(f: &Fixture, clients: AwsClients) -> AwsCloudProvider {
    ready(f, AwsCloudProvider::new(clients, f.settings.clone())).await
}

/// `provider` with the fixture's node class reconciled and applied.
async fn ready(f: &Fixture, provider: AwsCloudProvider) -> AwsCloudProvider {
    ready_class(provider, &node_class(&f.cluster)).await
}

/// `provider` with `nc` reconciled and applied.
async fn ready_class(provider: AwsCloudProvider, nc: &EC2NodeClass) -> AwsCloudProvider {
    let nc = provider.reconcile_node_class(nc).await;
    assert!(nc.is_true("Ready"), "node class not ready: {:?}", nc.status);
    provider.apply_node_class(nc);
    provider
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_resolves_subnets_security_groups_and_alias_amis() {
    let Some(ep) = endpoint("discovery") else {
        return;
    };
    let f = fixture(&ep, "discovery").await;
    let provider = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());
    let nc = provider.reconcile_node_class(&node_class(&f.cluster)).await;
    let status = nc.status.clone().expect("status");
    assert_eq!(status.subnets.len(), 2);
    let zones: BTreeSet<&str> = status.subnets.iter().map(|s| s.zone.as_str()).collect();
    assert_eq!(zones, BTreeSet::from(["us-east-1a", "us-east-1b"]));
    assert_eq!(status.security_groups.len(), 1);
    assert!(status.amis.iter().any(|a| a.id == f.amd64_image));
    // `role` gets a managed instance profile, named and placed as Karpenter does.
    assert_eq!(
        status.instance_profile,
        managed_profile(&f.cluster, &format!("KarpenterNodeRole-{}", f.cluster))
    );
    assert!(nc.is_true("InstanceProfileReady"));
    assert!(nc.is_true("Ready"));
    // A selector that matches nothing makes the class not ready, with the reason.
    let mut other = node_class(&f.cluster);
    other.spec.subnet_selector_terms[0]
        .tags
        .insert("karpenter.sh/discovery".into(), "nothing".into());
    let other = provider.reconcile_node_class(&other).await;
    assert!(other.is_false("SubnetsReady"));
    assert!(other.is_false("Ready"));
}

/// `spec.kubelet` (Karpenter v1.15): the controller validates the open map and reports
/// upstream's reasons; with NodeClassCEL its expressions set each type's allocatable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_block_is_validated_and_its_expressions_set_each_types_pods() {
    let Some(ep) = endpoint("kubelet") else {
        return;
    };
    let f = fixture(&ep, "kubelet").await;
    let with_kubelet = |kubelet: serde_json::Value| {
        let mut nc = node_class(&f.cluster);
        nc.spec.kubelet = Some(serde_json::from_value(kubelet).expect("kubelet"));
        nc
    };
    let reason = |nc: &EC2NodeClass| {
        let c = nc.condition("ValidationSucceeded").expect("condition");
        let status = serde_json::to_value(c.status).expect("status");
        let status = status.as_str().unwrap_or_default().to_owned();
        (status, c.reason.clone(), c.message.clone())
    };
    let provider = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());
    // Any kubelet field is admitted; one the kubelet does not have is refused here.
    let nc = provider
        .reconcile_node_class(&with_kubelet(
            serde_json::json!({"containerLogMaxSize": "50Mi"}),
        ))
        .await;
    assert!(nc.is_true("Ready"), "{:?}", nc.status);
    let nc = provider
        .reconcile_node_class(&with_kubelet(
            serde_json::json!({"containerLogMaxSizes": "50Mi"}),
        ))
        .await;
    let (status, why, message) = reason(&nc);
    assert_eq!(
        (status.as_str(), why.as_str()),
        ("False", "InvalidKubeletConfiguration")
    );
    assert!(message.contains("containerLogMaxSizes"), "{message}");
    assert!(nc.is_false("Ready"));
    // An expression needs the NodeClassCEL gate.
    let expr = with_kubelet(serde_json::json!({"maxPods": "vcpus * 8"}));
    let nc = provider.reconcile_node_class(&expr).await;
    assert_eq!(reason(&nc).1, "KubeletExpressionsDisabled");
    // With it, each type gets its own count.
    let mut settings = f.settings.clone();
    settings.node_class_cel = true;
    let provider = AwsCloudProvider::new(f.clients.clone(), settings);
    let nc = provider.reconcile_node_class(&expr).await;
    assert!(nc.is_true("Ready"), "{:?}", nc.status);
    provider.apply_node_class(nc.clone());
    let types = provider
        .node_class_instance_types(&nc)
        .await
        .expect("instance types");
    for (name, pods) in [("m5.large", 16), ("m5.xlarge", 32), ("c5.4xlarge", 128)] {
        let t = types.iter().find(|t| t.name == name).expect(name);
        assert_eq!(t.capacity.pods, pods, "{name}");
    }
    // An expression some type cannot evaluate (2-vCPU types divide by zero).
    let nc = provider
        .reconcile_node_class(&with_kubelet(
            serde_json::json!({"maxPods": "220 / (vcpus - 2)"}),
        ))
        .await;
    let (status, why, message) = reason(&nc);
    assert_eq!(
        (status.as_str(), why.as_str()),
        ("False", "KubeletExpressionEvaluationFailed")
    );
    assert!(message.contains("maxPods"), "{message}");
}

/// `spec.enclaveOptions.enabled`: only types that support Nitro Enclaves are offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enclaves_keep_only_the_types_that_support_them() {
    let Some(ep) = endpoint("enclaves") else {
        return;
    };
    let f = fixture(&ep, "enclaves").await;
    let provider = ready_provider(&f, f.clients.clone()).await;
    let plain = provider.node_class("default").expect("stored");
    let all = provider
        .node_class_instance_types(&plain)
        .await
        .expect("instance types");
    let mut enclaves = plain.clone();
    enclaves.spec.enclave_options =
        Some(serde_json::from_value(serde_json::json!({"enabled": true})).expect("options"));
    let kept = provider
        .node_class_instance_types(&enclaves)
        .await
        .expect("instance types");
    assert!(
        !kept.is_empty() && kept.len() < all.len(),
        "{} of {}",
        kept.len(),
        all.len()
    );
    // EC2 (and moto) describe m5.large without enclave support, m5.xlarge with it.
    assert!(all.iter().any(|t| t.name == "m5.large"));
    assert!(!kept.iter().any(|t| t.name == "m5.large"));
    assert!(kept.iter().any(|t| t.name == "m5.xlarge"));
}

/// The latest launch template data of every template the provider created for the
/// fixture's cluster, as EC2 (moto) stored it.
async fn template_data(f: &Fixture) -> Vec<aws_sdk_ec2::types::ResponseLaunchTemplateData> {
    let mut data = Vec::new();
    for t in cluster_templates(f).await {
        let versions = f
            .clients
            .ec2
            .describe_launch_template_versions()
            .launch_template_name(t.launch_template_name().expect("template name"))
            .versions("$Latest")
            .send()
            .await
            .expect("DescribeLaunchTemplateVersions");
        data.extend(
            versions
                .launch_template_versions()
                .iter()
                .filter_map(|v| v.launch_template_data().cloned()),
        );
    }
    data
}

/// A provider whose stored class is the fixture's, changed by `change`.
async fn ready_with(f: &Fixture, change: impl FnOnce(&mut EC2NodeClass)) -> AwsCloudProvider {
    let mut nc = node_class(&f.cluster);
    change(&mut nc);
    nc.validate().expect("valid class");
    let provider = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());
    ready_class(provider, &nc).await
}

/// The types `provider` offers for its class, then one on-demand claim `name` launched
/// with the choice of `types`, and the launch template data EC2 stored for it.
async fn offered_and_launched(
    f: &Fixture,
    provider: &AwsCloudProvider,
    name: &str,
    types: &[&str],
) -> (
    Vec<String>,
    NodeClaim,
    Vec<aws_sdk_ec2::types::ResponseLaunchTemplateData>,
) {
    let nc = provider.node_class("default").expect("stored");
    let offered = provider
        .node_class_instance_types(&nc)
        .await
        .expect("instance types")
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let c = claim(
        name,
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]),
    );
    let launched = provider.create(&c).await.expect("create");
    let data = template_data(f).await;
    assert!(!data.is_empty());
    (offered, launched, data)
}

/// `spec.cpuOptions.nestedVirtualization` (Karpenter v1.15): enabled, only the types EC2
/// describes with the `nested-virtualization` processor feature are offered, and the launch
/// template asks for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_virtualization_narrows_types_and_reaches_the_launch_template() {
    let Some(ep) = endpoint("cpu_options") else {
        return;
    };
    let f = fixture(&ep, "cpuopts").await;
    let provider = ready_with(&f, |nc| {
        nc.spec.cpu_options = Some(
            serde_json::from_value(serde_json::json!({"nestedVirtualization": "enabled"}))
                .expect("cpu options"),
        );
    })
    .await;
    let (kept, launched, data) =
        offered_and_launched(&f, &provider, "general-nested", &["c7i.large", "m5.large"]).await;
    // moto (like EC2) describes the 7th/8th-generation Intel types with the feature, and
    // m5 without it.
    assert!(kept.iter().any(|t| t == "c7i.large"), "{}", kept.len());
    assert!(!kept.iter().any(|t| t == "m5.large"));
    assert_eq!(
        launched.label("node.kubernetes.io/instance-type"),
        Some("c7i.large")
    );
    for d in &data {
        let nv = d.cpu_options().and_then(|c| c.nested_virtualization());
        assert_eq!(nv.map(|v| v.as_str()), Some("enabled"), "{d:?}");
    }
    // Without cpuOptions the template carries none (upstream leaves CpuOptions out).
    let g = fixture(&ep, "cpuoptsoff").await;
    let plain = ready_provider(&g, g.clients.clone()).await;
    let (_, _, data) = offered_and_launched(&g, &plain, "general-plain", &["m5.large"]).await;
    assert!(data.iter().all(|d| d.cpu_options().is_none()), "{data:?}");
}

/// `spec.ipPrefixCount` and `spec.connectionTracking` (Karpenter v1.15): the primary
/// interface of the launch template carries the prefixes, the timeouts and the security
/// groups; connection tracking offers only Nitro types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_and_connection_tracking_reach_the_primary_interface() {
    let Some(ep) = endpoint("prefixes") else {
        return;
    };
    let f = fixture(&ep, "prefixes").await;
    let provider = ready_with(&f, |nc| {
        nc.spec.ip_prefix_count = Some(3);
        nc.spec.connection_tracking = Some(
            serde_json::from_value(
                serde_json::json!({"tcpEstablishedTimeout": 120, "udpTimeout": 40}),
            )
            .expect("connection tracking"),
        );
    })
    .await;
    let (kept, launched, data) =
        offered_and_launched(&f, &provider, "general-prefixes", &["m5.large", "m4.large"]).await;
    // moto (like EC2) describes m4 on Xen and m5 on Nitro.
    assert!(kept.iter().any(|t| t == "m5.large"));
    assert!(!kept.iter().any(|t| t == "m4.large"));
    assert_eq!(
        launched.label("node.kubernetes.io/instance-type"),
        Some("m5.large")
    );
    let nc = provider.node_class("default").expect("stored");
    let groups: Vec<String> = nc
        .status_or_default()
        .security_groups
        .iter()
        .map(|g| g.id.clone())
        .collect();
    for d in &data {
        assert!(d.security_group_ids().is_empty(), "{d:?}");
        let [eni] = d.network_interfaces() else {
            panic!("one interface: {d:?}");
        };
        assert_eq!(eni.device_index(), Some(0));
        assert_eq!(eni.ipv4_prefix_count(), Some(3));
        assert_eq!(eni.groups(), groups.as_slice());
        let ct = eni.connection_tracking_specification().expect("tracking");
        assert_eq!(
            (
                ct.tcp_established_timeout(),
                ct.udp_stream_timeout(),
                ct.udp_timeout()
            ),
            (Some(120), None, Some(40))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_types_come_from_describe_instance_types() {
    let Some(ep) = endpoint("instance_types") else {
        return;
    };
    let f = fixture(&ep, "itypes").await;
    let provider = ready_provider(&f, f.clients.clone()).await;
    let nc = provider.node_class("default").expect("stored");
    let started = std::time::Instant::now();
    let types = provider
        .node_class_instance_types(&nc)
        .await
        .expect("instance types");
    let first = started.elapsed();
    assert!(types.len() > 300, "only {} types", types.len());
    let m5 = types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    assert!(
        m5.offerings
            .iter()
            .all(|o| o.zone == "us-east-1a" || o.zone == "us-east-1b")
    );
    assert!(
        m5.offerings
            .iter()
            .any(|o| o.capacity_type == "on-demand" && o.price == 0.096)
    );
    assert_eq!(m5.capacity.pods, 29);
    // The second call is served from the cache: the very same built types.
    let started = std::time::Instant::now();
    let again = provider
        .node_class_instance_types(&nc)
        .await
        .expect("cached");
    assert!(
        started.elapsed() < first,
        "cache was not used ({:?} vs {first:?})",
        started.elapsed()
    );
    assert!(Arc::ptr_eq(&types[0], &again[0]));
    // Marking an offering unavailable shows at once.
    provider
        .unavailable_offerings()
        .mark_unavailable(karpenter_cloudprovider::OfferingRef {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
        });
    let marked = provider
        .node_class_instance_types(&nc)
        .await
        .expect("rebuilt");
    let m5 = marked
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let offering = m5
        .offerings
        .iter()
        .find(|o| o.zone == "us-east-1a" && o.capacity_type == "on-demand")
        .expect("offering");
    assert!(!offering.available);
    // NodePool requirements filter the list.
    let pool: karpenter_cloudprovider::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}]
        }}}
    }))
    .expect("pool");
    let filtered = provider.instance_types(&pool).await.expect("filtered");
    assert!(!filtered.is_empty());
    assert!(filtered.iter().all(|t| t.name.starts_with("m5.")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_tag_get_list_drift_gc_and_delete() {
    let Some(ep) = endpoint("launch") else { return };
    let f = fixture(&ep, "launch").await;
    let provider = ready_provider(&f, f.clients.clone()).await;
    let c = claim(
        "general-abc12",
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]),
    );
    let launched = provider.create(&c).await.expect("create");
    let pid = launched.provider_id().to_string();
    assert!(pid.starts_with("aws:///us-east-1"), "{pid}");
    assert_eq!(
        launched.label("karpenter.sh/capacity-type"),
        Some("on-demand")
    );
    assert!(matches!(
        launched.label("node.kubernetes.io/instance-type"),
        Some("m5.large" | "m5.xlarge")
    ));
    assert!(
        launched
            .status
            .as_ref()
            .is_some_and(|s| s.allocatable.contains_key("cpu"))
    );
    assert!(
        launched
            .annotation("karpenter.k8s.aws/ec2nodeclass-hash")
            .is_some()
    );

    // Launched with the static tags only; the claim's own come once it has a Node.
    let instance = provider.get_instance(&pid).await.expect("get");
    assert!(!instance.tags.contains_key("karpenter.sh/nodeclaim"));
    assert!(!instance.tags.contains_key("Name"));
    let mut joined = launched.clone();
    joined.status.as_mut().expect("status").node_name = "ip-10-0-1-7.ec2.internal".into();
    assert!(tagging::is_taggable(&joined));
    // A claim without its Node is left alone; the joined one is tagged and marked.
    let claims = vec![Arc::new(launched.clone()), Arc::new(joined.clone())];
    let target = Claims(claims, Default::default());
    assert_eq!(tagging::tag_pass(&provider, &target).await, 1);
    assert_eq!(*target.1.lock().unwrap(), vec!["general-abc12".to_string()]);
    assert_eq!(
        provider.tag_instance(&joined).await,
        Ok(tagging::Tagged::Already)
    );
    // Tags on the instance.
    let instance = provider.get_instance(&pid).await.expect("get");
    for (k, v) in [
        ("Name", "ip-10-0-1-7.ec2.internal"),
        ("karpenter.sh/nodepool", "general"),
        ("karpenter.sh/nodeclaim", "general-abc12"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("eks:eks-cluster-name", f.cluster.as_str()),
        ("team", "platform"),
    ] {
        assert_eq!(instance.tags.get(k).map(String::as_str), Some(v), "tag {k}");
    }
    assert_eq!(
        instance
            .tags
            .get(&format!("kubernetes.io/cluster/{}", f.cluster))
            .map(String::as_str),
        Some("owned")
    );
    // The launch template was created once and carries the user data.
    assert_eq!(launch_templates(&f).await, 1);
    // It launches with the managed instance profile, which the NodeClaim names for the
    // garbage collector. (moto's CreateFleet does not copy the profile onto the instance,
    // so the template is what is checked.)
    let profile = managed_profile(&f.cluster, &format!("KarpenterNodeRole-{}", f.cluster));
    assert_eq!(
        launched.annotation("karpenter.k8s.aws/instance-profile-name"),
        Some(profile.as_str())
    );
    let template_profiles: Vec<String> = template_data(&f)
        .await
        .iter()
        .filter_map(|d| d.iam_instance_profile()?.name())
        .map(str::to_string)
        .collect();
    assert_eq!(template_profiles, vec![profile]);

    // get and list.
    let got = provider.get(&pid).await.expect("get");
    assert_eq!(got.name(), "general-abc12");
    let listed = provider.list().await.expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|c| c.provider_id().to_string())
            .collect::<Vec<_>>(),
        vec![pid.clone()]
    );

    // Not drifted; drifted once the AMI set changes.
    assert_eq!(provider.is_drifted(&launched).await.expect("drift"), None);
    let mut changed = provider.node_class("default").expect("nc");
    if let Some(s) = changed.status.as_mut() {
        s.amis.retain(|a| a.id != instance.image_id);
        s.amis
            .push(karpenter_cloudprovider_aws::nodeclass::AmiStatus {
                id: "ami-0123456789abcdef0".into(),
                ..Default::default()
            });
    }
    provider.apply_node_class(changed);
    assert_eq!(
        provider
            .is_drifted(&launched)
            .await
            .expect("drift")
            .map(|d| d.0),
        Some("AMIDrift".to_string())
    );

    // Garbage collection: with no claims, the instance is leaked once old enough.
    assert_eq!(
        provider
            .leaked_instances(&BTreeSet::new(), Duration::ZERO)
            .await
            .expect("gc"),
        vec![instance.id.clone()]
    );
    assert!(
        provider
            .leaked_instances(&BTreeSet::from([pid.clone()]), Duration::ZERO)
            .await
            .expect("gc")
            .is_empty()
    );
    assert!(
        provider
            .leaked_instances(&BTreeSet::new(), Duration::from_secs(3600))
            .await
            .expect("gc")
            .is_empty()
    );

    // Delete, then NotFound.
    provider.delete(&launched).await.expect("delete");
    assert!(provider.get(&pid).await.expect_err("gone").is_not_found());
    assert!(
        provider
            .delete(&launched)
            .await
            .expect_err("gone")
            .is_not_found()
    );
    assert!(provider.list().await.expect("list").is_empty());
}

/// The profile `name` as IAM has it (`None` once deleted).
async fn iam_profile(clients: &AwsClients, name: &str) -> Option<InstanceProfile> {
    match clients
        .iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
    {
        Ok(out) => out.instance_profile().map(InstanceProfile::from),
        Err(e) => {
            let e = karpenter_cloudprovider_aws::AwsError::api("GetInstanceProfile", e);
            assert_eq!(e.code(), Some("NoSuchEntity"), "{e}");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_instance_profiles_follow_the_role_and_the_class() {
    let Some(ep) = endpoint("instance_profiles") else {
        return;
    };
    let f = fixture(&ep, "iprof").await;
    let role_a = format!("KarpenterNodeRole-{}", f.cluster);
    let provider = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());

    // Creation: Karpenter's name, path and tags, holding the role.
    let nc = provider.reconcile_node_class(&node_class(&f.cluster)).await;
    assert!(nc.is_true("InstanceProfileReady"), "{:?}", nc.status);
    let first = nc.status_or_default().instance_profile;
    assert_eq!(first, managed_profile(&f.cluster, &role_a));
    let created = iam_profile(&f.clients, &first).await.expect("created");
    assert_eq!(
        created.path,
        format!("/karpenter/{REGION}/{}/{}/", f.cluster, uid(&f.cluster))
    );
    assert_eq!(created.role.as_deref(), Some(role_a.as_str()));
    for (k, v) in [
        (format!("kubernetes.io/cluster/{}", f.cluster), "owned"),
        ("eks:eks-cluster-name".into(), f.cluster.as_str()),
        ("karpenter.k8s.aws/ec2nodeclass".into(), "default"),
        ("topology.kubernetes.io/region".into(), REGION),
        ("team".into(), "platform"),
    ] {
        assert_eq!(created.tags.get(&k).map(String::as_str), Some(v), "tag {k}");
    }
    // Reconciling again keeps the profile; none is added.
    let again = provider.reconcile_node_class(&nc).await;
    assert_eq!(again.status_or_default().instance_profile, first);
    let class_path = format!("/karpenter/{REGION}/{}/{}/", f.cluster, uid(&f.cluster));
    let profiles = provider.instance_profiles();
    assert_eq!(profiles.list(&class_path).await.expect("list").len(), 1);

    // Role change: a new profile with the new role; the old one is left to running nodes.
    let role_b = format!("{role_a}-b");
    create_role(&f.clients, &role_b).await;
    let mut changed = again.clone();
    changed.spec.role = Some(role_b.clone());
    let changed = provider.reconcile_node_class(&changed).await;
    assert!(
        changed.is_true("InstanceProfileReady"),
        "{:?}",
        changed.status
    );
    let second = changed.status_or_default().instance_profile;
    assert_eq!(second, managed_profile(&f.cluster, &role_b));
    assert_ne!(second, first);
    let held = |p: Option<InstanceProfile>| p.and_then(|p| p.role);
    assert_eq!(
        held(iam_profile(&f.clients, &second).await),
        Some(role_b.clone())
    );
    assert_eq!(
        held(iam_profile(&f.clients, &first).await),
        Some(role_a.clone())
    );

    // Garbage collection: the old profile is protected for an hour in this provider; a
    // fresh one (a restarted controller) keeps it while a NodeClaim names it, then deletes
    // it. The class's current profile is never collected.
    let current = BTreeSet::from([second.clone()]);
    assert!(
        profiles
            .collect_garbage(&current, &BTreeSet::new())
            .await
            .expect("gc")
            .is_empty()
    );
    let restarted = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());
    let collector = restarted.instance_profiles();
    let active = BTreeSet::from([first.clone()]);
    assert!(
        collector
            .collect_garbage(&current, &active)
            .await
            .expect("gc")
            .is_empty()
    );
    assert_eq!(
        collector
            .collect_garbage(&current, &BTreeSet::new())
            .await
            .expect("gc"),
        vec![first.clone()]
    );
    assert_eq!(iam_profile(&f.clients, &first).await, None);
    assert!(iam_profile(&f.clients, &second).await.is_some());

    // A profile holding a different role gets it replaced, never a second one.
    let tags = BTreeMap::new();
    collector
        .create(&second, &role_a, &tags, &class_path)
        .await
        .expect("replace role");
    assert_eq!(
        held(iam_profile(&f.clients, &second).await),
        Some(role_a.clone())
    );

    // A missing role: not ready with the reason, and no half-made profile left behind.
    let mut missing = node_class(&f.cluster);
    missing.metadata.uid = Some(format!("{}-other", f.cluster));
    missing.spec.role = Some(format!("{role_a}-missing"));
    let missing = provider.reconcile_node_class(&missing).await;
    let cond = missing
        .condition("InstanceProfileReady")
        .expect("condition");
    assert_eq!(cond.reason, "RoleNotFound", "{cond:?}");
    assert!(missing.is_false("Ready"));
    let other_path = format!("/karpenter/{REGION}/{}/{}-other/", f.cluster, f.cluster);
    assert!(profiles.list(&other_path).await.expect("list").is_empty());

    // `instanceProfile` is used as given, without IAM.
    let mut unmanaged = node_class(&f.cluster);
    unmanaged.spec.role = None;
    unmanaged.spec.instance_profile = Some("existing-profile".into());
    let unmanaged = provider.reconcile_node_class(&unmanaged).await;
    assert_eq!(
        unmanaged.status_or_default().instance_profile,
        "existing-profile"
    );
    assert!(unmanaged.is_true("InstanceProfileReady"));

    // Deleting the class deletes its profiles (the roles stay).
    provider
        .instance_profiles()
        .finalize(&changed)
        .await
        .expect("finalize");
    assert!(profiles.list(&class_path).await.expect("list").is_empty());
    assert_eq!(iam_profile(&f.clients, &second).await, None);
    f.clients
        .iam
        .get_role()
        .role_name(&role_a)
        .send()
        .await
        .expect("the role is not Karpenter's to delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_reads_profiles_and_collection_runs_every_30_minutes() {
    let Some(ep) = endpoint("instance_profiles_shadow") else {
        return;
    };
    let f = fixture(&ep, "ipshadow").await;
    let clock = ManualClock::new(SystemTime::now());
    // The shadow mode creates nothing: the class waits for a profile with its role.
    let mut shadow_settings = f.settings.clone();
    shadow_settings.manage_instance_profiles = false;
    let shadow = AwsCloudProvider::new(f.clients.clone(), shadow_settings);
    let nc = shadow.reconcile_node_class(&node_class(&f.cluster)).await;
    let cond = nc.condition("InstanceProfileReady").expect("condition");
    assert_eq!(cond.reason, "InstanceProfileNotCreated", "{cond:?}");
    let class_path = format!("/karpenter/{REGION}/{}/{}/", f.cluster, uid(&f.cluster));
    let profiles = shadow.instance_profiles();
    assert!(profiles.list(&class_path).await.expect("list").is_empty());

    // Once the controller in charge made it, the shadow uses it.
    let provider = AwsCloudProvider::with_clock(
        f.clients.clone(),
        f.settings.clone(),
        Arc::new(clock.clone()),
    );
    let made = provider.reconcile_node_class(&node_class(&f.cluster)).await;
    let name = made.status_or_default().instance_profile;
    let seen = shadow.reconcile_node_class(&node_class(&f.cluster)).await;
    assert!(seen.is_true("InstanceProfileReady"), "{:?}", seen.status);
    assert_eq!(seen.status_or_default().instance_profile, name);
    // ... and never deletes.
    let none = BTreeSet::new();
    assert!(
        profiles
            .collect_garbage(&none, &none)
            .await
            .expect("gc")
            .is_empty()
    );
    profiles.finalize(&made).await.expect("finalize");
    assert!(iam_profile(&f.clients, &name).await.is_some());

    // Collection: due at once, then every 30 minutes. A profile nothing names is kept while
    // protected (an hour after it was made), so the second run deletes it.
    let collector = provider.instance_profiles();
    let run = || collector.collect_garbage_if_due(&[], Vec::new);
    assert_eq!(run().await.expect("gc"), Some(vec![]));
    assert_eq!(run().await.expect("gc"), None);
    clock.advance(Duration::from_secs(30 * 60));
    assert_eq!(run().await.expect("gc"), Some(vec![]));
    clock.advance(Duration::from_secs(30 * 60));
    assert_eq!(run().await.expect("gc"), Some(vec![name.clone()]));
    assert_eq!(iam_profile(&f.clients, &name).await, None);
}

/// Writes an SSM parameter (an alias image id) in the emulator.
async fn put_parameter(clients: &AwsClients, name: String, value: &str) {
    clients
        .ssm
        .put_parameter()
        .name(name)
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("PutParameter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_variants_give_gpu_and_neuron_types_their_images() {
    let Some(ep) = endpoint("variants") else {
        return;
    };
    let f = fixture(&ep, "variants").await;
    // Two more x86_64 images stand in for the nvidia and neuron variants.
    let images = f
        .clients
        .ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    let others: Vec<String> = images
        .images()
        .iter()
        .filter(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
        .filter_map(|i| i.image_id())
        .filter(|id| *id != f.amd64_image)
        .map(str::to_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(others.len() >= 2, "moto has too few x86_64 images");
    let (nvidia, neuron) = (others[0].clone(), others[1].clone());
    let base = format!(
        "/{}/eks/optimized-ami/{}/amazon-linux-2023/x86_64",
        f.cluster, f.settings.kubernetes_version
    );
    put_parameter(
        &f.clients,
        format!("{base}/nvidia/recommended/image_id"),
        &nvidia,
    )
    .await;
    put_parameter(
        &f.clients,
        format!("{base}/neuron/recommended/image_id"),
        &neuron,
    )
    .await;
    let provider = ready_provider(&f, f.clients.clone()).await;

    // The status lists each image with its variant's requirements.
    let status = provider
        .node_class("default")
        .and_then(|nc| nc.status)
        .expect("status");
    let requirement_keys = |id: &str| -> Vec<(String, String)> {
        status
            .amis
            .iter()
            .find(|a| a.id == id)
            .unwrap_or_else(|| panic!("{id} in status.amis: {:?}", status.amis))
            .requirements
            .iter()
            .map(|r| (r.key.clone(), r.operator.clone()))
            .collect()
    };
    assert_eq!(
        requirement_keys(&nvidia),
        [
            ("kubernetes.io/arch".to_string(), "In".to_string()),
            (
                "karpenter.k8s.aws/instance-gpu-count".to_string(),
                "Exists".to_string()
            ),
        ]
    );
    assert_eq!(
        requirement_keys(&neuron)[1],
        (
            "karpenter.k8s.aws/instance-accelerator-count".to_string(),
            "Exists".to_string()
        )
    );
    assert_eq!(requirement_keys(&f.amd64_image).len(), 3);

    // Each launch boots the image of its instance type's variant.
    let mut launched = Vec::new();
    for (name, instance_type, want) in [
        ("general-gpu01", "g4dn.xlarge", &nvidia),
        ("general-inf01", "inf2.xlarge", &neuron),
        ("general-std01", "m5.large", &f.amd64_image),
    ] {
        let c = claim(
            name,
            serde_json::json!([
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ]),
        );
        let out = provider.create(&c).await.expect("create");
        let instance = provider.get_instance(out.provider_id()).await.expect("get");
        assert_eq!(instance.instance_type, instance_type);
        assert_eq!(&instance.image_id, want, "{instance_type}");
        assert_eq!(
            out.status.as_ref().map(|s| s.image_id.as_str()),
            Some(want.as_str())
        );
        assert_eq!(provider.is_drifted(&out).await.expect("drift"), None);
        launched.push(out);
    }
    // One launch template per image.
    assert_eq!(launch_templates(&f).await, 3);

    // Swap the nvidia and neuron images: both stay listed, but the GPU and Neuron nodes now
    // run another variant's image, which is AMI drift (listing alone would miss it); the
    // standard node does not drift.
    let mut swapped = provider.node_class("default").expect("nc");
    if let Some(s) = swapped.status.as_mut() {
        for a in &mut s.amis {
            if a.id == nvidia {
                a.id = neuron.clone();
            } else if a.id == neuron {
                a.id = nvidia.clone();
            }
        }
    }
    provider.apply_node_class(swapped);
    for (c, want) in launched
        .iter()
        .zip([Some("AMIDrift"), Some("AMIDrift"), None])
    {
        assert_eq!(
            provider.is_drifted(c).await.expect("drift").map(|d| d.0),
            want.map(str::to_string),
            "{}",
            c.name()
        );
    }
    for c in &launched {
        provider.delete(c).await.expect("delete");
    }
}

/// A proxy in front of moto that answers every CreateFleet with an
/// InsufficientInstanceCapacity error for each requested override (moto never fails a
/// fleet) and forwards everything else.
async fn ice_proxy(upstream: String) -> String {
    answering_proxy(upstream, |form| {
        form.contains("Action=CreateFleet")
            .then(|| ice_response(form))
    })
    .await
}

/// A proxy in front of moto: a request `answer` returns a full HTTP response for is answered
/// with it, everything else is forwarded.
async fn answering_proxy(
    upstream: String,
    answer: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> String {
    let answer = std::sync::Arc::new(answer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let upstream = upstream.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let answer = answer.clone();
            tokio::spawn(async move {
                let Some((head, body)) = read_request(&mut client).await else {
                    return;
                };
                let body_text = String::from_utf8_lossy(&body).to_string();
                let response = if let Some(answered) = answer(&body_text) {
                    answered.into_bytes()
                } else {
                    let mut head_lines: Vec<&str> = head
                        .lines()
                        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                        .filter(|l| !l.is_empty())
                        .collect();
                    head_lines.push("Connection: close");
                    let mut req = head_lines.join("\r\n").into_bytes();
                    req.extend_from_slice(b"\r\n\r\n");
                    req.extend_from_slice(&body);
                    let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    if up.write_all(&req).await.is_err() {
                        return;
                    }
                    let mut resp = Vec::new();
                    let _ = up.read_to_end(&mut resp).await;
                    resp
                };
                let _ = client.write_all(&response).await;
                let _ = client.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            let mut body = buf[pos + 4..].to_vec();
            while body.len() < len {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            return Some((head, body));
        }
    }
}

/// A 200 response with an EC2 XML `body`.
fn xml_response(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn ice_response(form: &str) -> String {
    fleet_error_response(form, "InsufficientInstanceCapacity")
}

/// A CreateFleet answer that launched nothing, with error `code` for every override.
fn fleet_error_response(form: &str, code: &str) -> String {
    let params: BTreeMap<&str, &str> = form
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mut items = String::new();
    for (k, it) in &params {
        if let Some(prefix) = k.strip_suffix(".InstanceType") {
            let zone = params
                .get(format!("{prefix}.AvailabilityZone").as_str())
                .copied()
                .unwrap_or("");
            items.push_str(&format!(
                "<item><launchTemplateAndOverrides><overrides><instanceType>{it}</instanceType><availabilityZone>{zone}</availabilityZone></overrides></launchTemplateAndOverrides><lifecycle>spot</lifecycle><errorCode>{code}</errorCode><errorMessage>We currently do not have sufficient capacity in the Availability Zone you requested.</errorMessage></item>"
            ));
        }
    }
    xml_response(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>ice-1</requestId><fleetId>fleet-ice</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
    ))
}

/// A DescribeCapacityReservations answer (moto does not implement the call): an on-demand
/// reservation `cr-odcr` for m5.large (two free) for a query by its id, and a capacity block
/// `cr-block` of p5.48xlarge ending `block_ends` for a query by the tag `team=ml` or its id.
fn reservations_response(form: &str, block_ends: &str) -> String {
    let item = |id: &str, it: &str, kind: &str, end: &str| {
        format!(
            "<item><capacityReservationId>{id}</capacityReservationId><ownerId>123456789012</ownerId><instanceType>{it}</instanceType><availabilityZone>us-east-1a</availabilityZone><availableInstanceCount>2</availableInstanceCount><totalInstanceCount>2</totalInstanceCount><state>active</state>{end}<instanceMatchCriteria>targeted</instanceMatchCriteria><reservationType>{kind}</reservationType><interruptible>false</interruptible></item>"
        )
    };
    let mut items = String::new();
    if form.contains("CapacityReservationId.1=cr-odcr") {
        items.push_str(&item("cr-odcr", "m5.large", "default", ""));
    }
    if form.contains("Value.1=ml") || form.contains("CapacityReservationId.1=cr-block") {
        let end = format!("<endDate>{block_ends}</endDate>");
        items.push_str(&item("cr-block", "p5.48xlarge", "capacity-block", &end));
    }
    xml_response(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeCapacityReservationsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>cr-1</requestId><capacityReservationSet>{items}</capacityReservationSet></DescribeCapacityReservationsResponse>"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_reservations_reach_the_node_class_status() {
    let Some(ep) = endpoint("reservations") else {
        return;
    };
    let f = fixture(&ep, "reservations").await;
    // The block ends in 30 minutes: within upstream's 40, so it is already expiring.
    let ends = k8s_openapi::jiff::Timestamp::now() + std::time::Duration::from_secs(30 * 60);
    let ends = ends.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let proxy = answering_proxy(ep.clone(), move |form| {
        form.contains("Action=DescribeCapacityReservations")
            .then(|| {
                log.lock().unwrap().push(form.to_owned());
                reservations_response(form, &ends)
            })
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let provider = AwsCloudProvider::new(clients, f.settings.clone());
    let mut nc = node_class(&f.cluster);
    nc.spec.capacity_reservation_selector_terms = serde_json::from_value(serde_json::json!([
        {"id": "cr-odcr"},
        {"tags": {"team": "ml"}}
    ]))
    .unwrap();
    let nc = provider.reconcile_node_class(&nc).await;
    assert!(
        nc.is_true("CapacityReservationsReady"),
        "{:?}",
        nc.status.as_ref().map(|s| &s.conditions)
    );
    let reservations = &nc.status.as_ref().unwrap().capacity_reservations;
    let summary: Vec<(&str, &str, &str, &str)> = reservations
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.instance_type.as_str(),
                r.reservation_type.as_str(),
                r.state.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("cr-block", "p5.48xlarge", "capacity-block", "expiring"),
            ("cr-odcr", "m5.large", "default", "active"),
        ]
    );
    assert_eq!(provider.reservation_availability().available("cr-odcr"), 2);
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "one query per term");
    // The expiration check asks for the reservations claims run in, by id.
    let ids = BTreeSet::from(["cr-block".to_owned(), "cr-odcr".to_owned()]);
    let expiring = provider.expiring_reservations(&ids).await.expect("listed");
    assert_eq!(expiring, BTreeSet::from(["cr-block".to_owned()]));
    assert!(
        requests
            .iter()
            .all(|r| r.contains("Filter.1.Name=state") && r.contains("Filter.1.Value.1=active")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.contains("Name=tag%3Ateam") || r.contains("Name=tag:team")),
        "{requests:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_no_reservation_is_listed() {
    let Some(ep) = endpoint("reservations-off") else {
        return;
    };
    let f = fixture(&ep, "reservations-off").await;
    let proxy = answering_proxy(ep.clone(), |form| {
        assert!(
            !form.contains("Action=DescribeCapacityReservations"),
            "listed with the gate off"
        );
        None
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let mut settings = f.settings.clone();
    settings.reserved_capacity = false;
    let provider = AwsCloudProvider::new(clients, settings);
    let mut nc = node_class(&f.cluster);
    nc.spec.capacity_reservation_selector_terms =
        serde_json::from_value(serde_json::json!([{"id": "cr-odcr"}])).unwrap();
    let nc = provider.reconcile_node_class(&nc).await;
    assert!(nc.is_true("CapacityReservationsReady"));
    assert!(nc.status.unwrap().capacity_reservations.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_capacity_marks_offerings_unavailable() {
    let Some(ep) = endpoint("ice") else { return };
    let f = fixture(&ep, "ice").await;
    let proxy = ice_proxy(ep.clone()).await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let provider = ready_provider(&f, clients).await;
    let c = claim(
        "general-ice01",
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
        ]),
    );
    let err = provider.create(&c).await.expect_err("no capacity");
    let CloudProviderError::InsufficientCapacity { offerings, .. } = err else {
        panic!("expected InsufficientCapacity, got {err:?}");
    };
    let zones: BTreeSet<String> = offerings.iter().map(|o| o.zone.clone()).collect();
    assert_eq!(
        zones,
        BTreeSet::from(["us-east-1a".to_string(), "us-east-1b".to_string()])
    );
    assert!(
        offerings
            .iter()
            .all(|o| o.instance_type == "c5.large" && o.capacity_type == "spot")
    );
    let cache = provider.unavailable_offerings();
    assert!(cache.is_unavailable("c5.large", "us-east-1a", "spot"));
    assert!(!cache.is_unavailable("c5.large", "us-east-1a", "on-demand"));
    // The instance types now report those offerings unavailable, and a retry has nothing
    // left to try.
    let nc = provider.node_class("default").expect("nc");
    let types = provider
        .node_class_instance_types(&nc)
        .await
        .expect("types");
    let c5 = types
        .iter()
        .find(|t| t.name == "c5.large")
        .expect("c5.large");
    assert!(
        c5.offerings
            .iter()
            .filter(|o| o.capacity_type == "spot")
            .all(|o| !o.available)
    );
    assert!(
        c5.offerings
            .iter()
            .filter(|o| o.capacity_type == "on-demand")
            .all(|o| o.available)
    );
    assert!(
        provider
            .create(&c)
            .await
            .expect_err("still none")
            .is_insufficient_capacity()
    );
}

/// Keeps every metric event the provider reports.
#[derive(Debug, Default)]
struct Recorder {
    launch_failures: std::sync::Mutex<Vec<LaunchFailure>>,
    termination_failures: std::sync::Mutex<Vec<(String, String)>>,
    user_data: std::sync::Mutex<Vec<(String, usize)>>,
    requests: std::sync::Mutex<Vec<ApiRequest>>,
}

impl ProviderObserver for Recorder {
    fn launch_failure(&self, failure: &LaunchFailure) {
        self.launch_failures.lock().unwrap().push(failure.clone());
    }
    fn termination_failure(&self, zone: &str, zone_id: &str) {
        let failure = (zone.to_string(), zone_id.to_string());
        self.termination_failures.lock().unwrap().push(failure);
    }
    fn user_data_rendered(&self, node_class: &str, bytes: usize) {
        let rendered = (node_class.to_string(), bytes);
        self.user_data.lock().unwrap().push(rendered);
    }
    fn api_request(&self, request: &ApiRequest) {
        self.requests.lock().unwrap().push(request.clone());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_failures_user_data_and_api_calls_reach_the_observer() {
    let Some(ep) = endpoint("observe") else {
        return;
    };
    let f = fixture(&ep, "observe").await;
    let proxy = answering_proxy(ep.clone(), |form| {
        form.contains("Action=CreateFleet")
            .then(|| fleet_error_response(form, "VcpuLimitExceeded"))
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let provider = ready_provider(&f, clients).await;
    let recorder = Arc::new(Recorder::default());
    assert!(provider.set_observer(recorder.clone()));
    let c = claim(
        "general-obs01",
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
        ]),
    );
    provider
        .create(&c)
        .await
        .expect_err("every offering failed");
    // One failure per override (c5.large in both zones), each with its zone's id.
    let failures = recorder.launch_failures.lock().unwrap().clone();
    let zones: BTreeSet<&str> = failures.iter().map(|f| f.zone.as_str()).collect();
    assert_eq!(zones, BTreeSet::from(["us-east-1a", "us-east-1b"]));
    assert_eq!(failures.len(), 2, "{failures:?}");
    for failure in &failures {
        assert_eq!(failure.reason, "VCPULimitExceeded");
        assert_eq!(failure.capacity_type, "spot");
        assert!(failure.zone_id.starts_with("use1-az"), "{failure:?}");
    }
    let rendered = recorder.user_data.lock().unwrap().clone();
    assert!(
        rendered
            .iter()
            .any(|(class, bytes)| class == "default" && *bytes > 0),
        "{rendered:?}"
    );
    let requests = recorder.requests.lock().unwrap().clone();
    let fleet = requests
        .iter()
        .find(|r| r.action == "CreateFleet")
        .expect("CreateFleet observed");
    assert_eq!((fleet.service.as_str(), fleet.code), ("EC2", 200));
    assert_eq!(fleet.attempts.len(), 1);
    assert_eq!(fleet.retries(), 0);
    assert!(!provider.set_observer(Arc::new(Recorder::default())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_terminations_reach_the_observer() {
    let Some(ep) = endpoint("terminate-fail") else {
        return;
    };
    let f = fixture(&ep, "terminate-fail").await;
    let denied = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>denied-1</RequestID></Response>";
    let proxy = answering_proxy(ep.clone(), move |form| {
        form.contains("Action=TerminateInstances").then(|| {
            format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{denied}",
                denied.len()
            )
        })
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let provider = ready_provider(&f, clients).await;
    let recorder = Arc::new(Recorder::default());
    provider.set_observer(recorder.clone());
    let c = claim(
        "general-obs02",
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]),
    );
    let launched = provider.create(&c).await.expect("create");
    let zone = launched.label("topology.kubernetes.io/zone").expect("zone");
    provider
        .delete(&launched)
        .await
        .expect_err("terminate denied");
    let failures = recorder.termination_failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, zone);
    assert!(failures[0].1.starts_with("use1-az"), "{failures:?}");
    let requests = recorder.requests.lock().unwrap().clone();
    let terminate = requests
        .iter()
        .find(|r| r.action == "TerminateInstances")
        .expect("TerminateInstances observed");
    assert_eq!(terminate.code, 403);
    assert!(recorder.launch_failures.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_queue_end_to_end() {
    let Some(ep) = endpoint("interruption") else {
        return;
    };
    let clients = AwsClients::for_endpoint(&ep, REGION).await;
    let queue = unique("karpenter-interruption");
    clients
        .sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await
        .expect("CreateQueue");
    let poller_sqs = clients.sqs.clone();
    let owners: BTreeMap<String, String> = [
        ("i-0aaaaaaaaaaaaaaa1".to_string(), "general-a".to_string()),
        ("i-0aaaaaaaaaaaaaaa2".to_string(), "general-b".to_string()),
        ("i-0aaaaaaaaaaaaaaa3".to_string(), "general-c".to_string()),
        ("i-0aaaaaaaaaaaaaaa4".to_string(), "general-d".to_string()),
    ]
    .into();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let poller = InterruptionPoller::new(
        poller_sqs,
        &queue,
        Arc::new(ChannelSink {
            owners: owners.clone(),
            tx,
        }),
        Arc::new(karpenter_cloudprovider_aws::SystemClock),
    )
    .await
    .expect("poller")
    .with_wait_time(1);
    let url = poller.queue_url().to_string();
    for body in [
        samples::spot_interruption("i-0aaaaaaaaaaaaaaa1"),
        samples::rebalance_recommendation("i-0aaaaaaaaaaaaaaa2"),
        samples::scheduled_change("i-0aaaaaaaaaaaaaaa3"),
        samples::state_change("i-0aaaaaaaaaaaaaaa4", "stopping"),
        samples::spot_interruption("i-0unknown00000000"),
        "{this is not json".to_string(),
    ] {
        clients
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("SendMessage");
    }
    let mut total = karpenter_cloudprovider_aws::interruption::PollStats::default();
    for _ in 0..10 {
        let s = poller.poll_once().await.expect("poll");
        total.received += s.received;
        total.delivered += s.delivered;
        total.unmatched += s.unmatched;
        total.malformed += s.malformed;
        total.deleted += s.deleted;
        if total.received >= 6 {
            break;
        }
    }
    assert_eq!(total.received, 6);
    assert_eq!(total.delivered, 4);
    assert_eq!(total.unmatched, 1);
    assert_eq!(total.malformed, 1);
    assert_eq!(total.deleted, 6);
    let mut got = BTreeMap::new();
    while let Ok(ev) = rx.try_recv() {
        got.insert(ev.node_claim.clone(), ev.event.kind);
    }
    assert_eq!(
        got,
        BTreeMap::from([
            ("general-a".to_string(), InterruptionKind::SpotInterruption),
            (
                "general-b".to_string(),
                InterruptionKind::RebalanceRecommendation
            ),
            ("general-c".to_string(), InterruptionKind::ScheduledChange),
            ("general-d".to_string(), InterruptionKind::InstanceStopped),
        ])
    );
    // Every message was deleted: nothing comes back after the visibility timeout would
    // have expired for undeleted ones.
    let again = clients
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(
            aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .send()
        .await
        .expect("attributes");
    let attrs = again.attributes().expect("attrs");
    for v in attrs.values() {
        assert_eq!(v, "0");
    }
    assert_eq!(
        poller
            .metrics()
            .malformed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

/// Fails its first delivery, then records.
struct FlakySink {
    failures_left: std::sync::Mutex<u32>,
    delivered: std::sync::Mutex<Vec<NodeClaimInterruption>>,
}

#[async_trait::async_trait]
impl InterruptionSink for FlakySink {
    fn node_claim_for(&self, instance_id: &str) -> Option<String> {
        (instance_id == "i-0bbbbbbbbbbbbbbb1").then(|| "spot-a".to_string())
    }

    async fn deliver(&self, interruption: NodeClaimInterruption) -> Result<(), SinkError> {
        let mut left = self.failures_left.lock().expect("lock");
        if *left > 0 {
            *left -= 1;
            return Err(SinkError {
                node_claim: interruption.node_claim,
                message: "injected API failure".into(),
            });
        }
        self.delivered.lock().expect("lock").push(interruption);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_kept_in_queue_until_handled() {
    let Some(ep) = endpoint("interruption_retry") else {
        return;
    };
    let clients = AwsClients::for_endpoint(&ep, REGION).await;
    let queue = unique("karpenter-interruption-retry");
    clients
        .sqs
        .create_queue()
        .queue_name(&queue)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "1",
        )
        .send()
        .await
        .expect("CreateQueue");
    let sink = Arc::new(FlakySink {
        failures_left: std::sync::Mutex::new(1),
        delivered: std::sync::Mutex::new(Vec::new()),
    });
    let poller = InterruptionPoller::new(
        clients.sqs.clone(),
        &queue,
        sink.clone(),
        Arc::new(karpenter_cloudprovider_aws::SystemClock),
    )
    .await
    .expect("poller")
    .with_wait_time(1);
    clients
        .sqs
        .send_message()
        .queue_url(poller.queue_url())
        .message_body(samples::spot_interruption("i-0bbbbbbbbbbbbbbb1"))
        .send()
        .await
        .expect("SendMessage");
    let first = poller.poll_once().await.expect("poll");
    assert_eq!((first.received, first.failed, first.deleted), (1, 1, 0));
    assert!(sink.delivered.lock().expect("lock").is_empty());
    // After the visibility timeout the same message comes back and is handled.
    let mut retried = karpenter_cloudprovider_aws::interruption::PollStats::default();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        retried = poller.poll_once().await.expect("poll");
        if retried.received > 0 {
            break;
        }
    }
    assert_eq!(
        (retried.received, retried.delivered, retried.deleted),
        (1, 1, 1)
    );
    let delivered = sink.delivered.lock().expect("lock");
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].node_claim, "spot-a");
    assert_eq!(delivered[0].event.kind, InterruptionKind::SpotInterruption);
}

/// Decodes the `+` and `%XX` escapes of a form-encoded request body.
fn form_decode(form: &str) -> String {
    let bytes = form.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                if let Ok(b) = u8::from_str_radix(&form[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 2;
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_launches_target_their_reservation_and_fall_back_when_full() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(ep) = endpoint("reserved-launch") else {
        return;
    };
    let f = fixture(&ep, "reserved-launch").await;
    let full = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (full_flag, log) = (full.clone(), requests.clone());
    let proxy = answering_proxy(ep.clone(), move |form| {
        if form.contains("Action=CreateLaunchTemplate") || form.contains("Action=CreateFleet") {
            log.lock().unwrap().push(form_decode(form));
        }
        if form.contains("Action=DescribeCapacityReservations") {
            return Some(reservations_response(form, "2099-01-01T00:00:00.000Z"));
        }
        (form.contains("Action=CreateFleet") && full_flag.load(Ordering::SeqCst))
            .then(|| fleet_error_response(form, "ReservationCapacityExceeded"))
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let provider = AwsCloudProvider::new(clients, f.settings.clone());
    let mut nc = node_class(&f.cluster);
    nc.spec.capacity_reservation_selector_terms =
        serde_json::from_value(serde_json::json!([{"id": "cr-odcr"}])).unwrap();
    let nc = provider.reconcile_node_class(&nc).await;
    assert!(nc.is_true("Ready"), "{:?}", nc.status);
    provider.apply_node_class(nc.clone());

    // The class's m5.large carries a reserved offering for cr-odcr, nearly free.
    let reserved_offering = |types: &[Arc<karpenter_scheduling::model::InstanceType>]| {
        let m5 = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        let o = m5
            .offerings
            .iter()
            .find(|o| o.capacity_type == "reserved")
            .expect("a reserved offering")
            .clone();
        let od = m5
            .offerings
            .iter()
            .find(|o| o.capacity_type == "on-demand" && o.zone == "us-east-1a")
            .expect("on-demand in us-east-1a")
            .clone();
        (o, od)
    };
    let types = provider
        .node_class_instance_types(&nc)
        .await
        .expect("types");
    let (o, od) = reserved_offering(&types);
    assert_eq!((o.zone.as_str(), o.available), ("us-east-1a", true));
    assert!(
        o.price < od.price / 1_000_000.0,
        "{} vs {}",
        o.price,
        od.price
    );
    assert_eq!(o.reservation.as_ref().map(|r| r.capacity), Some(2));

    let pinned = |name: &str| {
        claim(
            name,
            serde_json::json!([
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                {"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "In", "values": ["cr-odcr"]}
            ]),
        )
    };
    let launched = provider
        .create(&pinned("general-rsv01"))
        .await
        .expect("create");
    assert_eq!(
        launched.label("karpenter.sh/capacity-type"),
        Some("reserved")
    );
    assert_eq!(
        launched.label("karpenter.k8s.aws/capacity-reservation-id"),
        Some("cr-odcr")
    );
    assert_eq!(
        launched.label("karpenter.k8s.aws/capacity-reservation-type"),
        Some("default")
    );
    assert_eq!(
        launched.label("topology.kubernetes.io/zone"),
        Some("us-east-1a")
    );
    assert_eq!(provider.reservation_availability().available("cr-odcr"), 1);
    {
        let sent = requests.lock().unwrap();
        let template = sent
            .iter()
            .find(|r| r.contains("Action=CreateLaunchTemplate"))
            .expect("a launch template was created");
        assert!(
            template.contains("CapacityReservationSpecification.CapacityReservationPreference=capacity-reservations-only")
                && template.contains("CapacityReservationTarget.CapacityReservationId=cr-odcr"),
            "{template}"
        );
        let fleet = sent
            .iter()
            .find(|r| r.contains("Action=CreateFleet"))
            .expect("a fleet");
        assert!(
            fleet.contains("DefaultTargetCapacityType=on-demand"),
            "{fleet}"
        );
    }

    // EC2 says the reservation is full: the launch fails over to the scheduler, and the
    // reserved offering is unavailable until the next listing, while on-demand m5.large
    // stays available.
    full.store(true, Ordering::SeqCst);
    let err = provider
        .create(&pinned("general-rsv02"))
        .await
        .expect_err("reservation full");
    assert!(err.is_insufficient_capacity(), "{err:?}");
    assert_eq!(provider.reservation_availability().available("cr-odcr"), 0);
    let types = provider
        .node_class_instance_types(&nc)
        .await
        .expect("types");
    let (o, od) = reserved_offering(&types);
    assert!(!o.available && od.available);
    full.store(false, Ordering::SeqCst);

    // An on-demand launch with the gate on opts out of open reservations.
    requests.lock().unwrap().clear();
    let on_demand = claim(
        "general-rsv03",
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]),
    );
    let od_claim = provider.create(&on_demand).await.expect("on-demand");
    assert_eq!(
        od_claim.label("karpenter.sh/capacity-type"),
        Some("on-demand")
    );
    assert_eq!(
        od_claim.label("karpenter.k8s.aws/capacity-reservation-id"),
        None
    );
    {
        let sent = requests.lock().unwrap();
        let template = sent
            .iter()
            .find(|r| r.contains("Action=CreateLaunchTemplate"))
            .expect("a second launch template");
        assert!(
            template
                .contains("CapacityReservationSpecification.CapacityReservationPreference=none")
                && !template.contains("CapacityReservationTarget"),
            "{template}"
        );
    }

    // Once the reserved instance is gone, its reservation has room again.
    provider.delete(&launched).await.expect("terminate");
    let gone = provider.delete(&launched).await.expect_err("gone");
    assert!(
        matches!(gone, CloudProviderError::NotFound { .. }),
        "{gone:?}"
    );
    assert_eq!(provider.reservation_availability().available("cr-odcr"), 1);
    provider
        .delete(&od_claim)
        .await
        .expect("terminate on-demand");
}

/// One DescribeInstanceStatus item: `checks` are `(summary element, status, impaired since)`
/// and `events` the scheduled events' codes.
fn status_item(id: &str, checks: &[(&str, &str, &str)], events: &[&str]) -> String {
    let mut item = format!(
        "<item><instanceId>{id}</instanceId><availabilityZone>us-east-1a</availabilityZone><instanceState><code>16</code><name>running</name></instanceState>"
    );
    for (element, status, since) in checks {
        let summary = if *status == "failed" {
            "impaired"
        } else {
            "ok"
        };
        item.push_str(&format!(
            "<{element}><status>{summary}</status><details><item><name>reachability</name><status>{status}</status><impairedSince>{since}</impairedSince></item></details></{element}>"
        ));
    }
    if !events.is_empty() {
        item.push_str("<eventsSet>");
        for code in events {
            item.push_str(&format!("<item><code>{code}</code><description>scheduled</description><notBefore>2030-01-01T00:00:00.000Z</notBefore></item>"));
        }
        item.push_str("</eventsSet>");
    }
    item + "</item>"
}

fn statuses_response(items: &[String], next_token: Option<&str>) -> String {
    let next = next_token.map_or(String::new(), |t| format!("<nextToken>{t}</nextToken>"));
    xml_response(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceStatusResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>status-1</requestId><instanceStatusSet>{}</instanceStatusSet>{next}</DescribeInstanceStatusResponse>",
        items.concat()
    ))
}

/// The statuses the instance-status proxy serves, changed by the test between checks.
#[derive(Debug, Default)]
struct StatusScript {
    /// Whether i-0b (system check failed) is still reported.
    system_failure: bool,
    /// Every DescribeInstanceStatus request seen.
    requests: Vec<String>,
}

/// What moto cannot produce: impaired checks and scheduled events. The instance query
/// reports i-0a (instance check failing for 10 minutes) and i-0x (not the cluster's); the
/// system query i-0a again, i-0b (system check failing, while the script says so) and i-0e
/// (failing for 30 s: not yet); the event query i-0c (retirement) on its first page and
/// i-0d (system reboot, checks passing) on its second.
fn instance_status_answer(form: &str, script: &std::sync::Mutex<StatusScript>) -> Option<String> {
    if !form.contains("Action=DescribeInstanceStatus") {
        return None;
    }
    let mut script = script.lock().unwrap();
    script.requests.push(form.to_string());
    let ago = |secs: u64| {
        let t = SystemTime::now() - Duration::from_secs(secs);
        aws_smithy_types::DateTime::from(t)
            .fmt(aws_smithy_types::date_time::Format::DateTime)
            .expect("a formattable time")
    };
    let (old, fresh) = (ago(600), ago(30));
    let items = if form.contains("Filter.1.Name=instance-status.status") {
        vec![
            status_item("i-0a", &[("instanceStatus", "failed", &old)], &[]),
            status_item("i-0x", &[("instanceStatus", "failed", &old)], &[]),
        ]
    } else if form.contains("Filter.1.Name=system-status.status") {
        let mut items = vec![status_item(
            "i-0a",
            &[
                ("instanceStatus", "failed", &old),
                ("systemStatus", "failed", &old),
            ],
            &[],
        )];
        if script.system_failure {
            items.push(status_item(
                "i-0b",
                &[("systemStatus", "failed", &old)],
                &[],
            ));
        }
        items.push(status_item(
            "i-0e",
            &[("systemStatus", "failed", &fresh)],
            &[],
        ));
        items
    } else if form.contains("NextToken=page-2") {
        let passing = [("instanceStatus", "passed", old.as_str())];
        return Some(statuses_response(
            &[status_item("i-0d", &passing, &["system-reboot"])],
            None,
        ));
    } else {
        assert!(form.contains("Filter.1.Name=event.code"), "{form}");
        assert!(form.contains("instance-retirement"), "{form}");
        return Some(statuses_response(
            &[status_item("i-0c", &[], &["instance-retirement"])],
            Some("page-2"),
        ));
    };
    Some(statuses_response(&items, None))
}

/// Owns i-0a … i-0e and records what it is handed.
#[derive(Default)]
struct RecordingSink {
    delivered: std::sync::Mutex<Vec<NodeClaimInterruption>>,
}

#[async_trait::async_trait]
impl InterruptionSink for RecordingSink {
    fn node_claim_for(&self, instance_id: &str) -> Option<String> {
        let owned = ["i-0a", "i-0b", "i-0c", "i-0d", "i-0e"];
        owned
            .contains(&instance_id)
            .then(|| format!("claim-{}", &instance_id[2..]))
    }

    async fn deliver(&self, interruption: NodeClaimInterruption) -> Result<(), SinkError> {
        self.delivered.lock().unwrap().push(interruption);
        Ok(())
    }
}

#[derive(Debug, Default)]
struct UnhealthyCounter(std::sync::Mutex<Vec<String>>);

impl ProviderObserver for UnhealthyCounter {
    fn instance_status_unhealthy(&self, category: &str) {
        self.0.lock().unwrap().push(category.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_instance_statuses_become_interruptions_counted_once() {
    let Some(ep) = endpoint("instance-status") else {
        return;
    };
    let script = Arc::new(std::sync::Mutex::new(StatusScript {
        system_failure: true,
        ..StatusScript::default()
    }));
    let answers = script.clone();
    let proxy = answering_proxy(ep, move |form| instance_status_answer(form, &answers)).await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let counter = Arc::new(UnhealthyCounter::default());
    assert!(clients.observer.set(counter.clone()).is_ok());
    let sink = Arc::new(RecordingSink::default());
    let clock = Arc::new(karpenter_cloudprovider_aws::SystemClock);
    let watcher = InstanceStatusWatcher::new(
        clients.ec2.clone(),
        sink.clone(),
        clients.observer.clone(),
        clock.clone(),
        false,
    );
    let stats = watcher.check_once().await.expect("check");
    // Three queries, the event query over two pages.
    assert_eq!(script.lock().unwrap().requests.len(), 4);
    // i-0a, i-0x, i-0b, i-0c, i-0d: i-0e has failed for only 30 s.
    assert_eq!(stats.unhealthy, 5, "{stats:?}");
    let delivered: Vec<(String, String, &str)> = sink
        .delivered
        .lock()
        .unwrap()
        .iter()
        .map(|d| {
            let id = d.event.instance_id.clone();
            (d.node_claim.clone(), id, d.event.kind.as_str())
        })
        .collect();
    let want = [
        ("claim-0a", "i-0a", "instance_status"),
        ("claim-0b", "i-0b", "system_status"),
        ("claim-0c", "i-0c", "event_status"),
        ("claim-0d", "i-0d", "event_status"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(c, i, k)| (c.to_string(), i.to_string(), *k))
        .collect();
    // i-0a's system failure came from the second query: the first report of it wins.
    assert_eq!(delivered, want);
    let counted = |c: &UnhealthyCounter| c.0.lock().unwrap().clone();
    assert_eq!(
        counted(&counter),
        [
            "InstanceStatus",
            "SystemStatus",
            "EventStatus",
            "EventStatus"
        ]
    );
    // Still unhealthy: handled again (deleting is idempotent), counted no more.
    let again = watcher.check_once().await.expect("check");
    assert_eq!(again.delivered, 4);
    assert!(again.newly_unhealthy.is_empty(), "{again:?}");
    assert_eq!(counted(&counter).len(), 4);
    // i-0b recovers for one check, then fails again: counted a second time.
    script.lock().unwrap().system_failure = false;
    assert_eq!(watcher.check_once().await.expect("check").delivered, 3);
    script.lock().unwrap().system_failure = true;
    let back = watcher.check_once().await.expect("check");
    let key = ("i-0b".to_string(), StatusCategory::SystemStatus);
    assert_eq!(back.newly_unhealthy, [key]);
    assert_eq!(counted(&counter).len(), 5);

    // Dry run: nothing is handed over, the statuses are still counted.
    let (observer, dry_sink) = (
        Arc::new(UnhealthyCounter::default()),
        Arc::new(RecordingSink::default()),
    );
    let slot = karpenter_cloudprovider_aws::observe::ObserverSlot::default();
    assert!(slot.set(observer.clone()).is_ok());
    let dry = InstanceStatusWatcher::new(clients.ec2.clone(), dry_sink.clone(), slot, clock, true);
    let stats = dry.check_once().await.expect("check");
    assert_eq!(stats.delivered, 0);
    assert!(dry_sink.delivered.lock().unwrap().is_empty());
    assert_eq!(counted(&observer).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_permission_instance_status_checks_stop_after_one_error() {
    let Some(ep) = endpoint("instance-status-denied") else {
        return;
    };
    let denied = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>denied-2</RequestID></Response>";
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let proxy = answering_proxy(ep, move |form| {
        form.contains("Action=DescribeInstanceStatus").then(|| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{denied}",
                denied.len()
            )
        })
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let sink = Arc::new(RecordingSink::default());
    let watcher = InstanceStatusWatcher::new(
        clients.ec2.clone(),
        sink,
        clients.observer.clone(),
        Arc::new(karpenter_cloudprovider_aws::SystemClock),
        false,
    );
    let err = watcher.check_once().await.expect_err("denied");
    assert_eq!(err.code(), Some("UnauthorizedOperation"));
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    // `run` returns (instead of polling every minute) once the permission is known missing.
    tokio::time::timeout(Duration::from_secs(30), watcher.run(shutdown))
        .await
        .expect("run stops without the permission");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_moto_instances_are_not_interrupted() {
    let Some(ep) = endpoint("instance-status-healthy") else {
        return;
    };
    let clients = AwsClients::for_endpoint(&ep, REGION).await;
    let images = clients
        .ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("images");
    let image = images.images()[0].image_id().expect("image id").to_string();
    let run = clients
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(2)
        .max_count(2)
        .send()
        .await
        .expect("RunInstances");
    assert_eq!(run.instances().len(), 2);
    let reports = karpenter_cloudprovider_aws::instance_status::describe(&clients.ec2)
        .await
        .expect("DescribeInstanceStatus with every filter");
    let unhealthy =
        karpenter_cloudprovider_aws::instance_status::unhealthy(reports, SystemTime::now());
    assert!(unhealthy.is_empty(), "{unhealthy:?}");
}

/// The CreateFleet request of a claim for c5.large or m5.large on demand, with the
/// provider's NodeOverlay evaluation `published` and the claim annotated (or not) as one
/// whose options carry overlaid prices.
async fn fleet_request(
    ep: &str,
    test: &str,
    published: Option<karpenter_cloudprovider::overlay::Published>,
    annotated: bool,
) -> String {
    let f = fixture(ep, test).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let proxy = answering_proxy(ep.to_owned(), move |form| {
        if form.contains("Action=CreateFleet") {
            record.lock().unwrap().push(form.to_owned());
        }
        None
    })
    .await;
    let clients = AwsClients::for_endpoint(&proxy, REGION).await;
    let mut provider = ready_provider(&f, clients).await;
    if let Some(published) = published {
        provider = provider.with_overlays(published);
    }
    let mut c = claim(
        &format!("general-{test}"),
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "m5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]),
    );
    if annotated {
        c.metadata.annotations = Some(
            [(
                karpenter_cloudprovider::overlay::PRICE_OVERLAY_APPLIED_ANNOTATION.to_owned(),
                "true".to_owned(),
            )]
            .into(),
        );
    }
    provider.create(&c).await.expect("launched");
    let forms = seen.lock().unwrap().clone();
    assert_eq!(forms.len(), 1, "{forms:?}");
    forms[0].clone()
}

/// `(instance type, priority)` of each override of a CreateFleet form, in order.
fn fleet_overrides(form: &str) -> Vec<(String, Option<f64>)> {
    let fields: BTreeMap<&str, &str> = form
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mut out = Vec::new();
    for i in 1.. {
        let key = |f: &str| format!("LaunchTemplateConfigs.1.Overrides.{i}.{f}");
        let Some(it) = fields.get(key("InstanceType").as_str()) else {
            break;
        };
        let priority = fields
            .get(key("Priority").as_str())
            .and_then(|p| p.parse().ok());
        out.push(((*it).to_owned(), priority));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn price_overlays_steer_the_fleet_as_upstream() {
    let Some(ep) = endpoint("overlay-launch") else {
        return;
    };
    // Without overlays: EC2's own prices, lowest-price, c5.large (the cheaper) first.
    let plain = fleet_request(&ep, "ovl-plain", None, false).await;
    assert!(
        plain.contains("OnDemandOptions.AllocationStrategy=lowest-price"),
        "{plain}"
    );
    let order: Vec<String> = fleet_overrides(&plain).into_iter().map(|o| o.0).collect();
    assert_eq!(
        order.first().map(String::as_str),
        Some("c5.large"),
        "{order:?}"
    );

    // A licence fee on c5.large makes m5.large the cheaper one.
    let provider_types = {
        let f = fixture(&ep, "ovl-types").await;
        let p = ready_provider(&f, AwsClients::for_endpoint(&ep, REGION).await).await;
        p.instance_types(&general_pool())
            .await
            .expect("instance types")
    };
    let overlay: karpenter_cloudprovider::v1alpha1::NodeOverlay =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "c5-licence"},
            "spec": {
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}],
                "priceAdjustment": "+0.5"
            }
        }))
        .expect("overlay");
    let pool = general_pool();
    let (overlaid, evaluation) = karpenter_cloudprovider::overlay::overlay_instance_types(
        &[overlay],
        &[&pool],
        &[("general".to_owned(), provider_types.clone())].into(),
    );
    let published = karpenter_cloudprovider::overlay::Published::default();
    published.publish(evaluation);
    let price = |types: &[Arc<karpenter_scheduling::model::InstanceType>], name: &str| {
        let it = types.iter().find(|t| t.name == name).expect("type listed");
        let o = it.offerings.iter().find(|o| o.capacity_type == "on-demand");
        o.expect("on-demand offering").price
    };
    let c5 = price(&overlaid["general"], "c5.large");
    let m5 = price(&overlaid["general"], "m5.large");
    assert!((c5 - price(&provider_types, "c5.large") - 0.5).abs() < 1e-9);

    let steered = fleet_request(&ep, "ovl-steered", Some(published), true).await;
    assert!(
        steered.contains("OnDemandOptions.AllocationStrategy=prioritized"),
        "{steered}"
    );
    let overrides = fleet_overrides(&steered);
    assert_eq!(
        overrides.first().map(|o| o.0.as_str()),
        Some("m5.large"),
        "{overrides:?}"
    );
    for (name, priority) in &overrides {
        let expected = if name == "c5.large" { c5 } else { m5 };
        let got = priority.expect("every override has a priority");
        assert!((got - expected).abs() < 1e-6, "{name}: {got} != {expected}");
    }
}

fn general_pool() -> karpenter_cloudprovider::NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
    }))
    .expect("pool")
}

/// Counts each batcher's calls and batch sizes, and every API call by action.
#[derive(Debug, Default)]
struct BatchRecorder {
    sizes: std::sync::Mutex<Vec<(&'static str, usize)>>,
    actions: std::sync::Mutex<Vec<String>>,
}

impl ProviderObserver for BatchRecorder {
    fn batch_size(&self, batcher: &'static str, size: usize) {
        self.sizes.lock().unwrap().push((batcher, size));
    }
    fn api_request(&self, request: &ApiRequest) {
        self.actions.lock().unwrap().push(request.action.clone());
    }
}

impl BatchRecorder {
    fn calls(&self, action: &str) -> usize {
        self.actions
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == action)
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_launches_and_terminations_share_ec2_calls() {
    let Some(ep) = endpoint("batching") else {
        return;
    };
    let f = fixture(&ep, "batching").await;
    // Wide idle windows: with upstream's 35 ms a loaded machine (CI runs this beside the
    // other tests, in a debug build) can take longer than that to bring the next claim to
    // the batcher, and the four claims then split over two fleets.
    let wide = |o: BatchOptions| BatchOptions {
        idle: Duration::from_secs(1),
        max: Duration::from_secs(10),
        ..o
    };
    let defaults = BatchWindows::default();
    let windows = BatchWindows {
        describe: wide(defaults.describe),
        terminate: wide(defaults.terminate),
        fleet: wide(defaults.fleet),
    };
    let provider = AwsCloudProvider::new(f.clients.clone(), f.settings.clone());
    let provider = ready(&f, provider.with_batch_windows(windows)).await;
    let recorder = Arc::new(BatchRecorder::default());
    assert!(provider.set_observer(recorder.clone()));
    let requirements = serde_json::json!([
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ]);
    // Warm the instance-type and template caches, so only the fleets are left to compare.
    let first = provider
        .create(&claim("general-warm0", requirements.clone()))
        .await
        .expect("create");
    let before = recorder.calls("CreateFleet");
    let claims: Vec<NodeClaim> = (0..4)
        .map(|i| claim(&format!("general-bat{i:02}"), requirements.clone()))
        .collect();
    let launched = futures::future::join_all(claims.iter().map(|c| provider.create(c))).await;
    let ids: BTreeSet<String> = launched
        .iter()
        .map(|r| r.as_ref().expect("create").provider_id().to_string())
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(!ids.contains(first.provider_id()));
    let sizes = recorder.sizes.lock().unwrap().clone();
    let actions = recorder.actions.lock().unwrap().clone();
    assert_eq!(
        recorder.calls("CreateFleet") - before,
        1,
        "one fleet for four claims: {sizes:?} {actions:?}"
    );
    let sizes = recorder.sizes.lock().unwrap().clone();
    assert!(sizes.contains(&("create_fleet", 4)), "{sizes:?}");
    let instance_ids: Vec<String> = ids
        .iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    let fleet_instances = f
        .clients
        .ec2
        .describe_instances()
        .set_instance_ids(Some(instance_ids))
        .send()
        .await
        .expect("DescribeInstances");
    let counted: usize = fleet_instances
        .reservations()
        .iter()
        .map(|r| r.instances().len())
        .sum();
    assert_eq!(counted, 4);

    // Four deletions: their describes and their terminations each share one call.
    let (describes, terminates) = (
        recorder.calls("DescribeInstances"),
        recorder.calls("TerminateInstances"),
    );
    let claims: Vec<NodeClaim> = launched.into_iter().map(Result::unwrap).collect();
    let deleted = futures::future::join_all(claims.iter().map(|c| provider.delete(c))).await;
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    assert_eq!(recorder.calls("DescribeInstances") - describes, 1);
    assert_eq!(recorder.calls("TerminateInstances") - terminates, 1);
    let sizes = recorder.sizes.lock().unwrap().clone();
    assert!(sizes.contains(&("terminate_instances", 4)), "{sizes:?}");
    assert!(sizes.contains(&("describe_instances", 4)), "{sizes:?}");
    for c in &claims {
        let gone = provider.get(c.provider_id()).await;
        assert!(
            matches!(gone, Err(CloudProviderError::NotFound { .. })),
            "{gone:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_terminate_with_an_unknown_instance_fails_only_that_caller() {
    let Some(ep) = endpoint("batching-split") else {
        return;
    };
    let f = fixture(&ep, "batching-split").await;
    let provider = ready_provider(&f, f.clients.clone()).await;
    let requirements = serde_json::json!([
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ]);
    let launched = provider
        .create(&claim("general-split", requirements))
        .await
        .expect("create");
    let real = launched
        .provider_id()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let unknown = "i-0123456789abcdef0".to_string();
    let (a, b) = tokio::join!(
        provider.terminate_instances(std::slice::from_ref(&real)),
        provider.terminate_instances(std::slice::from_ref(&unknown)),
    );
    assert_eq!(a, Ok(()));
    assert!(b.as_ref().unwrap_err().is_not_found(), "{b:?}");
    let gone = provider.get(launched.provider_id()).await;
    assert!(
        matches!(gone, Err(CloudProviderError::NotFound { .. })),
        "{gone:?}"
    );
}

/// Claims for the tagging pass, and the names it marked.
struct Claims(Vec<Arc<NodeClaim>>, std::sync::Mutex<Vec<String>>);

#[async_trait::async_trait]
impl tagging::TagTarget for Claims {
    fn claims(&self) -> Vec<Arc<NodeClaim>> {
        self.0.clone()
    }
    async fn mark_tagged(&self, name: &str) -> Result<(), String> {
        self.1.lock().unwrap().push(name.to_string());
        Ok(())
    }
}
