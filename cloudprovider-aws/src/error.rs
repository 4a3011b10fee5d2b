//! Errors of the AWS provider and their mapping onto [`CloudProviderError`].

use crate::userdata::UserDataError;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use karpenter_cloudprovider::CloudProviderError;

/// Why an AWS provider operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AwsError {
    /// An AWS API call failed.
    #[error("{operation}: {code}: {message}")]
    Api {
        /// The API operation (`CreateFleet`).
        operation: &'static str,
        /// The AWS error code (`UnauthorizedOperation`), or `Unknown` (transport errors).
        code: String,
        /// The AWS message or transport error.
        message: String,
    },
    /// An AWS response lacked something the provider needs.
    #[error("{operation}: unexpected response: {message}")]
    InvalidResponse {
        /// The API operation.
        operation: &'static str,
        /// What was missing or wrong.
        message: String,
    },
    /// The EC2NodeClass named by a NodePool or NodeClaim is unknown or not resolved.
    #[error("EC2NodeClass {name:?} not ready: {reason}")]
    NodeClassNotReady {
        /// NodeClass name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The NodeClass's user data could not be generated.
    #[error("EC2NodeClass {name:?}: {source}")]
    UserData {
        /// NodeClass name.
        name: String,
        /// The cause.
        source: UserDataError,
    },
    /// A setting or argument is invalid.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What is invalid (`kubelet.kubeReserved`, `provider id`).
        what: String,
        /// Why.
        message: String,
    },
}

impl AwsError {
    /// An [`AwsError::Api`] from an SDK error, keeping the AWS code and message.
    pub fn api<E>(operation: &'static str, err: E) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let code = err.code().unwrap_or("Unknown").to_string();
        let message = err
            .message()
            .map(str::to_string)
            .unwrap_or_else(|| aws_sdk_ec2::error::DisplayErrorContext(&err).to_string());
        Self::Api {
            operation,
            code,
            message,
        }
    }

    /// The AWS error code, if this is an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the error says the resource does not exist (`InvalidInstanceID.NotFound` …).
    pub fn is_not_found(&self) -> bool {
        self.code()
            .is_some_and(|c| c.ends_with(".NotFound") || c.ends_with("NotFoundException"))
    }
}

impl From<AwsError> for CloudProviderError {
    fn from(e: AwsError) -> Self {
        match e {
            AwsError::NodeClassNotReady { name, reason } => {
                CloudProviderError::NodeClassNotReady { name, reason }
            }
            other => CloudProviderError::Other(other.to_string()),
        }
    }
}
