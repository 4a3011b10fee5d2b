//! End-to-end tests against the moto AWS emulator. Start it with
//! `export KARPENTER_AWS_TEST_ENDPOINT=$(scripts/aws-emulator.sh start)`; without the
//! variable every test prints a notice and passes without doing anything.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use karpenter_cloudprovider::v1::{NodeClaim, NodeClaimSpec, StatusConditions};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_cloudprovider_aws::interruption::{
    ChannelSink, InterruptionKind, InterruptionSink, NodeClaimInterruption, SinkError, samples,
};
use karpenter_cloudprovider_aws::nodeclass::{EC2NodeClass, from_yaml};
use karpenter_cloudprovider_aws::{AwsClients, AwsCloudProvider, AwsSettings, InterruptionPoller};
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

/// How many launch templates the provider created for the fixture's cluster.
async fn launch_templates(f: &Fixture) -> usize {
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
        .len()
}

fn node_class(cluster: &str) -> EC2NodeClass {
    from_yaml(&format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
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
    let provider = AwsCloudProvider::new(clients, f.settings.clone());
    let nc = provider.reconcile_node_class(&node_class(&f.cluster)).await;
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
    assert_eq!(
        status.instance_profile,
        format!("KarpenterNodeRole-{}", f.cluster)
    );
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
    // The second call is served from the cache.
    let started = std::time::Instant::now();
    provider
        .node_class_instance_types(&nc)
        .await
        .expect("cached");
    assert!(
        started.elapsed() < first,
        "cache was not used ({:?} vs {first:?})",
        started.elapsed()
    );
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

    // Tags on the instance.
    let instance = provider.get_instance(&pid).await.expect("get");
    for (k, v) in [
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
                "<item><launchTemplateAndOverrides><overrides><instanceType>{it}</instanceType><availabilityZone>{zone}</availabilityZone></overrides></launchTemplateAndOverrides><lifecycle>spot</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient capacity in the Availability Zone you requested.</errorMessage></item>"
            ));
        }
    }
    xml_response(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>ice-1</requestId><fleetId>fleet-ice</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
    ))
}

/// A DescribeCapacityReservations answer (moto does not implement the call): an on-demand
/// reservation `cr-odcr` for m5.large (two free) for a query by its id, and a capacity block
/// `cr-block` of p5.48xlarge ending `block_ends` for a query by the tag `team=ml`.
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
    if form.contains("Value.1=ml") {
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
