use super::*;

/// The flags as an empty command line and environment give them (the operator's `clap`
/// defaults).
fn defaults() -> Flags<'static> {
    Flags {
        cloud_provider: "fake",
        cluster_name: "",
        batch_max_duration: "10s",
        batch_idle_duration: "1s",
        feature_gates: "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false",
        legacy_node_repair: false,
        fake_capacity_reservations: "[]",
        fake_insufficient_capacity: "",
        fake_launch_delay: "",
        log_level: "info",
        log_format: "json",
        log_output_paths: "stdout",
        log_error_output_paths: "stderr",
        metrics_port: 8080,
        health_probe_port: 8081,
        disable_leader_election: false,
        dry_run: false,
        disable_cluster_state_observability: false,
        leader_election_namespace: "",
        leader_election_name: "karpenter-leader-election",
        kube_client_qps: 200,
        kube_client_burst: 300,
        preference_policy: "Respect",
        min_values_policy: "Strict",
        repack_consolidation: true,
        repack_price_improvement_threshold: 0.1,
        repack_min_node_age: "10m",
        repack_min_score: 0.0,
        system_namespace: "kube-system",
        cluster_endpoint: "",
        cluster_ca_bundle: "",
        interruption_queue: "",
        isolated_vpc: false,
        vm_memory_overhead_percent: 0.075,
        reserved_enis: 0,
        scheduler_config: "",
        ignore_dra_requests: true,
        aws_feature_gates: "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false",
        ami_refresh_interval: "1m",
        subnet_refresh_interval: "1m",
        security_group_refresh_interval: "1m",
    }
}

fn invalid_flag(result: Result<Settings, SettingsError>) -> &'static str {
    match result {
        Err(SettingsError::Invalid { flag, .. } | SettingsError::Duration { flag, .. }) => flag,
        other => panic!("expected an invalid flag, got {other:?}"),
    }
}

#[test]
fn the_default_flags_give_the_default_settings() {
    assert_eq!(Settings::from_args(defaults()), Ok(Settings::default()));
}

#[test]
fn empty_log_level_and_output_mean_karpenters_defaults() {
    let s = Settings::from_args(Flags {
        log_level: "",
        log_output_paths: "",
        ..defaults()
    })
    .unwrap();
    assert_eq!(
        (s.log_level, s.log_output),
        (LogLevel::Info, LogOutput::Stdout)
    );
    let s = Settings::from_args(Flags {
        log_level: "error",
        log_output_paths: "stderr",
        ..defaults()
    })
    .unwrap();
    assert_eq!(
        (s.log_level, s.log_output),
        (LogLevel::Error, LogOutput::Stderr)
    );
}

#[test]
fn only_debug_raises_the_binarys_own_logs_above_its_dependencies() {
    let quiet_client = "kube_client::client::builder=off";
    assert_eq!(
        LogLevel::Debug.filter_directive(),
        format!("info,karpenter=debug,{quiet_client}")
    );
    assert_eq!(
        LogLevel::Info.filter_directive(),
        format!("info,{quiet_client},kube_client::client=error")
    );
    assert_eq!(
        LogLevel::Error.filter_directive(),
        format!("error,{quiet_client}")
    );
}

#[test]
fn the_first_invalid_flag_in_check_order_is_named() {
    let both = Flags {
        log_format: "yaml",
        batch_max_duration: "soon",
        ..defaults()
    };
    assert_eq!(invalid_flag(Settings::from_args(both)), "log-format");
    let both = Flags {
        cloud_provider: "gcp",
        log_level: "loud",
        ..defaults()
    };
    assert_eq!(invalid_flag(Settings::from_args(both)), "cloud-provider");
    let both = Flags {
        min_values_policy: "Lax",
        kube_client_qps: 0,
        ..defaults()
    };
    assert_eq!(invalid_flag(Settings::from_args(both)), "min-values-policy");
}

#[test]
fn durations_must_be_positive_go_durations() {
    assert_eq!(
        duration("f", "F", "1m30s"),
        Ok(std::time::Duration::from_secs(90))
    );
    for text in ["0s", "-1s", "10", "1d", ""] {
        let err = duration("batch-idle-duration", "BATCH_IDLE_DURATION", text).unwrap_err();
        assert!(
            matches!(&err, SettingsError::Duration { value, .. } if value == text),
            "{text}: {err}"
        );
    }
    let err = duration("f", "F", "0s").unwrap_err().to_string();
    assert!(err.contains("must be positive"), "{err}");
}

#[test]
fn client_rate_needs_a_positive_qps_and_a_burst_no_lower() {
    let zero = Flags {
        kube_client_qps: 0,
        ..defaults()
    };
    assert_eq!(invalid_flag(Settings::from_args(zero)), "kube-client-qps");
    let s = Settings::from_args(Flags {
        kube_client_qps: 50,
        kube_client_burst: 10,
        ..defaults()
    })
    .unwrap();
    assert_eq!((s.kube_client_qps, s.kube_client_burst), (50, 50));
}

#[test]
fn memory_overhead_is_a_fraction_below_one() {
    for ok in [0.0, 0.5, 0.999] {
        let flags = Flags {
            vm_memory_overhead_percent: ok,
            ..defaults()
        };
        assert!(Settings::from_args(flags).is_ok(), "{ok}");
    }
    for bad in [1.0, -0.1, 7.5] {
        let flags = Flags {
            vm_memory_overhead_percent: bad,
            ..defaults()
        };
        assert_eq!(
            invalid_flag(Settings::from_args(flags)),
            "vm-memory-overhead-percent"
        );
    }
}

#[test]
fn repack_threshold_is_a_fraction_below_one_and_the_switch_turns_it_off() {
    for ok in [0.0, 0.05, 0.999] {
        let s = Settings::from_args(Flags {
            repack_price_improvement_threshold: ok,
            ..defaults()
        })
        .unwrap();
        assert_eq!(s.repack.map(|r| r.price_improvement_threshold), Some(ok));
    }
    for bad in [1.0, -0.1, 20.0, f64::NAN] {
        let flags = Flags {
            repack_price_improvement_threshold: bad,
            ..defaults()
        };
        let err = Settings::from_args(flags).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "--repack-price-improvement-threshold (REPACK_PRICE_IMPROVEMENT_THRESHOLD)"
            ),
            "{err}"
        );
    }
    let off = Settings::from_args(Flags {
        repack_consolidation: false,
        ..defaults()
    })
    .unwrap();
    assert_eq!(off.repack, None);
}

#[test]
fn repack_min_node_age_is_a_duration_from_zero_to_a_day() {
    for (ok, ms) in [
        ("0s", 0),
        ("90s", 90_000),
        ("10m", 600_000),
        ("24h", 86_400_000),
    ] {
        let s = Settings::from_args(Flags {
            repack_min_node_age: ok,
            ..defaults()
        })
        .unwrap();
        assert_eq!(s.repack.map(|r| r.min_node_age), Some(ms), "{ok}");
    }
    for bad in ["-1s", "25h", "10", "soon", ""] {
        let err = Settings::from_args(Flags {
            repack_min_node_age: bad,
            ..defaults()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--repack-min-node-age (REPACK_MIN_NODE_AGE)"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn repack_min_score_is_a_number_from_zero_to_a_hundred() {
    for ok in [0.0, 0.5, 100.0] {
        let s = Settings::from_args(Flags {
            repack_min_score: ok,
            ..defaults()
        })
        .unwrap();
        assert_eq!(s.repack.map(|r| r.min_score), Some(ok));
    }
    for bad in [-0.1, 100.5, f64::NAN, f64::INFINITY] {
        let flags = Flags {
            repack_min_score: bad,
            ..defaults()
        };
        assert_eq!(invalid_flag(Settings::from_args(flags)), "repack-min-score");
    }
}

#[test]
fn aws_needs_a_cluster_name_and_endpoint_and_fake_does_not() {
    let aws = Flags {
        cloud_provider: "aws",
        cluster_name: "prod",
        ..defaults()
    };
    assert_eq!(
        Settings::from_args(aws),
        Err(SettingsError::Required {
            flag: "cluster-endpoint",
            env: "CLUSTER_ENDPOINT",
            provider: "aws"
        })
    );
    let s = Settings::from_args(Flags {
        cluster_endpoint: "https://example",
        cluster_ca_bundle: "Q0E=",
        ..aws
    })
    .unwrap();
    assert_eq!(s.aws.cluster_endpoint, "https://example");
    assert_eq!(s.aws.cluster_ca_bundle, "Q0E=");
    assert!(
        Settings::from_args(defaults()).is_ok(),
        "fake needs neither"
    );
}

#[test]
fn the_lease_namespace_falls_back_to_the_system_namespace() {
    let s = Settings::from_args(Flags {
        system_namespace: "karpenter",
        ..defaults()
    })
    .unwrap();
    assert_eq!(s.leader_election_namespace, "karpenter");
    let s = Settings::from_args(Flags {
        system_namespace: "karpenter",
        leader_election_namespace: "elections",
        ..defaults()
    })
    .unwrap();
    assert_eq!(s.leader_election_namespace, "elections");
    assert_eq!(s.system_namespace, "karpenter");
}

#[test]
fn dry_run_disables_leader_election() {
    let s = Settings::from_args(Flags {
        dry_run: true,
        ..defaults()
    })
    .unwrap();
    assert!(s.dry_run && s.disable_leader_election);
}

#[test]
fn bad_gates_and_reservations_name_their_flag() {
    let e = Settings::from_args(Flags {
        feature_gates: "NodeRepair=maybe",
        ..defaults()
    })
    .unwrap_err();
    assert!(
        e.to_string().starts_with("--feature-gates (FEATURE_GATES)"),
        "{e}"
    );
    let e = Settings::from_args(Flags {
        fake_capacity_reservations: "{}",
        ..defaults()
    })
    .unwrap_err();
    assert!(matches!(e, SettingsError::FakeReservations(_)), "{e}");
}

#[test]
fn fake_launch_faults_are_parsed_and_refused_with_another_provider() {
    let s = Settings::from_args(Flags {
        fake_insufficient_capacity: "m5.large/us-east-1a",
        fake_launch_delay: "c5.large=5s",
        ..defaults()
    })
    .unwrap();
    assert_eq!(s.fake_launch_faults.insufficient_capacity.len(), 1);
    assert_eq!(s.fake_launch_faults.delays.len(), 1);
    let aws = |ice, delay| Flags {
        cloud_provider: "aws",
        cluster_name: "prod",
        cluster_endpoint: "https://example.com",
        fake_insufficient_capacity: ice,
        fake_launch_delay: delay,
        ..defaults()
    };
    assert_eq!(
        Settings::from_args(aws("m5.large", "")),
        Err(SettingsError::FakeOnly {
            flag: "fake-insufficient-capacity",
            env: "FAKE_INSUFFICIENT_CAPACITY"
        })
    );
    let e = Settings::from_args(aws("", "1s")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--fake-launch-delay (FAKE_LAUNCH_DELAY) is only acted on by --cloud-provider fake"
    );
    assert!(Settings::from_args(aws("", "")).is_ok());
}

#[test]
fn scheduler_config_is_parsed_or_names_the_flag_and_field() {
    assert_eq!(
        Settings::from_args(defaults()).unwrap().scheduler_config,
        None
    );
    let flags = Flags {
        scheduler_config: "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    \
                           topologyKey: topology.kubernetes.io/zone\n    \
                           whenUnsatisfiable: DoNotSchedule\n",
        ..defaults()
    };
    let config = Settings::from_args(flags)
        .unwrap()
        .scheduler_config
        .unwrap();
    assert_eq!(config.default_constraints.len(), 1);
    let flags = Flags {
        scheduler_config: "podTopologySpread: {defaultConstraints: [{maxSkew: 0}]}",
        ..defaults()
    };
    let e = Settings::from_args(flags).unwrap_err().to_string();
    assert_eq!(
        e,
        "--scheduler-config (SCHEDULER_CONFIG): podTopologySpread.defaultConstraints[0].maxSkew: \
         must be greater than 0"
    );
}

#[test]
fn aws_feature_gates_and_refresh_intervals() {
    let s = Settings::from_args(defaults()).unwrap();
    assert!(!s.aws.node_class_cel);
    assert_eq!(
        s.aws.ami_refresh_interval,
        std::time::Duration::from_secs(60)
    );
    let s = Settings::from_args(Flags {
        aws_feature_gates: "NodeClassCEL=true, RebootForRepair=false",
        subnet_refresh_interval: "5m",
        ..defaults()
    })
    .unwrap();
    assert!(s.aws.node_class_cel);
    assert_eq!(
        s.aws.subnet_refresh_interval,
        std::time::Duration::from_secs(300)
    );
    let e = Settings::from_args(Flags {
        aws_feature_gates: "NodeClassCEL=maybe",
        ..defaults()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("AWS_FEATURE_GATES"), "{e}");
    let e = Settings::from_args(Flags {
        security_group_refresh_interval: "0s",
        ..defaults()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("SECURITY_GROUP_REFRESH_INTERVAL"), "{e}");
}

#[test]
fn log_error_output_paths_are_read() {
    let s = Settings::from_args(defaults()).unwrap();
    assert_eq!(s.log_error_output, [ErrorOutput::Stderr]);
    let s = Settings::from_args(Flags {
        log_error_output_paths: "stdout, /var/log/karpenter-errors",
        ..defaults()
    })
    .unwrap();
    assert_eq!(
        s.log_error_output,
        [
            ErrorOutput::Stdout,
            ErrorOutput::File("/var/log/karpenter-errors".into())
        ]
    );
    let e = Settings::from_args(Flags {
        log_error_output_paths: "file:///tmp/x",
        ..defaults()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("LOG_ERROR_OUTPUT_PATHS"), "{e}");
}
