//! Host port bookkeeping, as Karpenter's `HostPortUsage`: two ports conflict when protocol
//! and port are equal and the IPs are equal or either is unspecified.

use crate::model::HostPort;

fn protocol(p: &HostPort) -> &str {
    if p.protocol.is_empty() {
        "TCP"
    } else {
        p.protocol.as_str()
    }
}

fn unspecified(ip: &str) -> bool {
    matches!(ip, "" | "0.0.0.0" | "::")
}

/// Whether two host ports cannot both be bound on one node.
pub(crate) fn conflicts(a: &HostPort, b: &HostPort) -> bool {
    a.port == b.port
        && protocol(a) == protocol(b)
        && (a.host_ip == b.host_ip || unspecified(&a.host_ip) || unspecified(&b.host_ip))
}

/// The host ports bound on one node (or planned for one claim).
#[derive(Debug, Clone, Default)]
pub(crate) struct HostPortUsage {
    ports: Vec<HostPort>,
}

impl HostPortUsage {
    /// Records ports as bound.
    pub(crate) fn add(&mut self, ports: &[HostPort]) {
        self.ports.extend_from_slice(ports);
    }

    /// The first already-bound port that `ports` would clash with, with the clashing request.
    pub(crate) fn conflict<'a>(
        &'a self,
        ports: &'a [HostPort],
    ) -> Option<(&'a HostPort, &'a HostPort)> {
        ports
            .iter()
            .find_map(|p| self.ports.iter().find(|e| conflicts(p, e)).map(|e| (p, e)))
    }
}

/// `host port 8080/TCP` (with the IP when one is set).
pub(crate) fn describe(p: &HostPort) -> String {
    if unspecified(&p.host_ip) {
        format!("{}/{}", p.port, protocol(p))
    } else {
        format!("{}:{}/{}", p.host_ip, p.port, protocol(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(port: i32, proto: &str, ip: &str) -> HostPort {
        HostPort {
            port,
            protocol: proto.into(),
            host_ip: ip.into(),
        }
    }

    #[test]
    fn conflict_rules_match_upstream() {
        assert!(conflicts(&hp(80, "TCP", ""), &hp(80, "", "10.0.0.1")));
        assert!(!conflicts(&hp(80, "TCP", ""), &hp(80, "UDP", "")));
        assert!(!conflicts(&hp(80, "TCP", ""), &hp(81, "TCP", "")));
        assert!(!conflicts(
            &hp(80, "TCP", "10.0.0.1"),
            &hp(80, "TCP", "10.0.0.2")
        ));
        assert!(conflicts(
            &hp(80, "TCP", "10.0.0.1"),
            &hp(80, "TCP", "10.0.0.1")
        ));
        assert!(conflicts(
            &hp(80, "TCP", "0.0.0.0"),
            &hp(80, "TCP", "10.0.0.2")
        ));
        let mut u = HostPortUsage::default();
        u.add(&[hp(80, "TCP", "")]);
        assert!(
            u.conflict(&[hp(443, "TCP", ""), hp(80, "TCP", "")])
                .is_some()
        );
        assert!(u.conflict(&[hp(443, "TCP", "")]).is_none());
        assert_eq!(describe(&hp(80, "", "")), "80/TCP");
    }
}
