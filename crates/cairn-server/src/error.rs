//! Errors as HTTP answers: every failure is a JSON [`ErrorResponse`] with a 4xx status for
//! what the client got wrong and 5xx only for the server's own trouble (the database).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_core::{CheckpointError, StoreError};
use cairn_store::RunError;

use crate::wire::ErrorResponse;

/// A failed request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 422: the request is malformed.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: the state does not allow it.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500: the server's storage failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorResponse {
            code: self.code.to_owned(),
            detail: self.message.clone(),
            message: self.message,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<CheckpointError> for ApiError {
    fn from(e: CheckpointError) -> Self {
        match e {
            CheckpointError::NotFound(id) => ApiError::not_found(format!("thread {id} not found")),
            CheckpointError::Exists(id) => {
                ApiError::conflict(format!("thread {id} exists already"))
            }
            e @ CheckpointError::Conflict { .. } => ApiError::conflict(e.to_string()),
            e @ CheckpointError::Invalid(_) => ApiError::conflict(e.to_string()),
            e => ApiError::internal(e.to_string()),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            e @ RunError::Busy { .. } => ApiError::conflict(e.to_string()),
            RunError::NotFound(id) => ApiError::not_found(format!("run {id} not found")),
            e @ (RunError::Exists(_) | RunError::BadTransition { .. }) => {
                ApiError::conflict(e.to_string())
            }
            e => ApiError::internal(e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Backend(_) => ApiError::internal(e.to_string()),
            e => ApiError::invalid(e.to_string()),
        }
    }
}
