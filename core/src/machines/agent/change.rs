//! A change of an agent's state as the application writes it through a driver handle's
//! `set_state`: fields left alone keep their values. `T` is the driver's tool type (with
//! its handler); the driver turns the change into a [`StatePatch`] with
//! [`StateChange::into_patch`], which resolves a new model as a call would.

use crate::data::message::Message;
use crate::data::options::Options;
use crate::data::provider::ApiKey;
use crate::machines::client::{ClientConfig, ClientError, ModelRef};
use crate::machines::generate::ToolDecl;

use super::io::Update;
use super::StatePatch;

/// What `set_state` changes. Built with its methods, applied atomically while idle.
#[derive(Debug, Clone)]
pub struct StateChange<T> {
    model: Option<ModelRef>,
    api_key: Option<ApiKey>,
    system: Option<Option<String>>,
    messages: Option<Vec<Message>>,
    tools: Option<Vec<T>>,
    options: Option<Options>,
    system_with: Option<Update<Option<String>>>,
    messages_with: Option<Update<Vec<Message>>>,
    options_with: Option<Update<Options>>,
}

impl<T> Default for StateChange<T> {
    fn default() -> Self {
        Self {
            model: None,
            api_key: None,
            system: None,
            messages: None,
            tools: None,
            options: None,
            system_with: None,
            messages_with: None,
            options_with: None,
        }
    }
}

impl<T> StateChange<T> {
    /// A change that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new model (its provider and key are resolved as for a call).
    pub fn model(mut self, model: impl Into<ModelRef>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// A key: for the new model if one is given (else the client's or the
    /// environment's is used), or for the current one.
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// A new system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(Some(system.into()));
        self
    }

    /// Removes the system prompt.
    pub fn no_system(mut self) -> Self {
        self.system = Some(None);
        self
    }

    /// A new committed history: empty, or ending with an assistant message without
    /// tool calls.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = Some(messages);
        self
    }

    /// New tools (they replace all the old ones).
    pub fn tools(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// New options for every step (over the client's defaults).
    pub fn options(mut self, options: Options) -> Self {
        self.options = Some(options);
        self
    }

    /// The system prompt as a function of the one the agent holds when the change applies.
    pub fn system_with(mut self, f: impl Fn(Option<&str>) -> Option<String> + Send + Sync + 'static) -> Self {
        self.system_with = Some(Update::new(move |current: &Option<String>| f(current.as_deref())));
        self
    }

    /// The history as a function of the one the agent holds when the change applies (to
    /// drop old turns, say).
    pub fn messages_with(mut self, f: impl Fn(&[Message]) -> Vec<Message> + Send + Sync + 'static) -> Self {
        self.messages_with = Some(Update::new(move |current: &Vec<Message>| f(current)));
        self
    }

    /// The options as a function of those the agent holds when the change applies.
    pub fn options_with(mut self, f: impl Fn(&Options) -> Options + Send + Sync + 'static) -> Self {
        self.options_with = Some(Update::new(f));
        self
    }

    /// The same change with each new tool passed through `f` (a driver whose tools wrap
    /// another driver's hands these on).
    pub fn map_tools<U>(self, f: impl FnMut(T) -> U) -> StateChange<U> {
        let Self { model, api_key, system, messages, tools, options, system_with, messages_with, options_with } = self;
        StateChange {
            model,
            api_key,
            system,
            messages,
            tools: tools.map(|t| t.into_iter().map(f).collect()),
            options,
            system_with,
            messages_with,
            options_with,
        }
    }

    /// For drivers: the machine's patch (`decl` describes a tool to the machine) and the
    /// new tools, if any, whose handlers the driver swaps in once the patch is accepted.
    pub fn into_patch(
        self,
        client: &ClientConfig,
        env: &dyn Fn(&str) -> Option<String>,
        decl: impl Fn(&T) -> ToolDecl,
    ) -> Result<(StatePatch, Option<Vec<T>>), ClientError> {
        let mut patch = StatePatch {
            system: self.system,
            messages: self.messages,
            tools: self.tools.as_ref().map(|tools| tools.iter().map(decl).collect()),
            options: self.options.map(|o| o.merged_over(&client.default_options)),
            system_with: self.system_with,
            messages_with: self.messages_with,
            options_with: self.options_with,
            ..StatePatch::default()
        };
        if let Some(model) = &self.model {
            let (model, provider, api_key) = client.resolve(model, self.api_key.as_ref(), env)?;
            patch.model = Some(model);
            patch.provider = Some(provider);
            patch.api_key = Some(api_key);
        } else if let Some(key) = self.api_key {
            patch.api_key = Some(Some(key));
        }
        Ok((patch, self.tools))
    }
}
