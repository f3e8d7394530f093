//! A session's conversation as a tree of messages: one node per message (a user message,
//! an assistant message, and the user message carrying tool results are separate nodes),
//! each with its parent. Regenerating a reply or editing a message adds a sibling; the
//! tree only grows (navigating never deletes). The *active path* runs from a root to the
//! *head*: its messages are the agent's history. Under each parent a *cursor* remembers
//! the child last on the path, so [`Tree::extend`] walks back down the branch that was
//! last in use (else the newest child).
//!
//! Node ids are dense: the n-th node made has id n, so every lookup is an index, and a
//! node's parent always has a smaller id (a tree loaded from a store is checked for both
//! by [`Tree::from_nodes`]). Several disjoint roots are allowed; an empty path means the
//! next turn starts a new root.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::data::message::Message;
use crate::data::usage::Usage;

/// A node's id: the order in which the tree made it (0, 1, 2, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One message in the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its id.
    pub id: NodeId,
    /// Its parent; `None` for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<NodeId>,
    /// The message.
    pub message: Message,
    /// On the last assistant node of a turn: the turn's usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Why a tree refused an operation, or a list of nodes is not a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    /// No node has this id.
    NotFound(NodeId),
    /// A node's id is not its position (ids are dense, in order).
    OutOfOrder {
        /// The position.
        expected: NodeId,
        /// The id found there.
        found: NodeId,
    },
    /// A node's parent does not come before it.
    BadParent {
        /// The node.
        node: NodeId,
        /// Its parent.
        parent: NodeId,
    },
    /// A path that does not run from a root down through parent links.
    BadPath(Vec<NodeId>),
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(id) => write!(f, "no node {id}"),
            Self::OutOfOrder { expected, found } => write!(f, "node {found} stands where node {expected} belongs"),
            Self::BadParent { node, parent } => {
                write!(f, "node {node} names parent {parent}, which does not precede it")
            }
            Self::BadPath(path) => write!(f, "{path:?} is not a path from a root"),
        }
    }
}

impl std::error::Error for TreeError {}

/// Where the path stands and which child was last active under each parent: what a
/// store keeps beside the nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The active path, root first.
    pub path: Vec<NodeId>,
    /// For each parent (`None`: the roots), the child last active under it.
    pub cursors: Vec<(Option<NodeId>, NodeId)>,
}

/// The message tree (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tree {
    nodes: Vec<Node>,
    /// Each node's children, oldest first.
    children: Vec<Vec<NodeId>>,
    roots: Vec<NodeId>,
    path: Vec<NodeId>,
    cursors: BTreeMap<Option<NodeId>, NodeId>,
}

impl Tree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tree of `nodes` (ids dense and in order, parents before children), the path
    /// empty.
    pub fn from_nodes(nodes: impl IntoIterator<Item = Node>) -> Result<Self, TreeError> {
        let mut tree = Self::new();
        for node in nodes {
            let expected = NodeId(tree.nodes.len() as u64);
            if node.id != expected {
                return Err(TreeError::OutOfOrder { expected, found: node.id });
            }
            if let Some(parent) = node.parent {
                if parent >= node.id {
                    return Err(TreeError::BadParent { node: node.id, parent });
                }
            }
            tree.insert(node);
        }
        Ok(tree)
    }

    /// Puts back where the path stood and the cursors (from a store).
    pub fn restore(&mut self, position: &Position) -> Result<(), TreeError> {
        let bad = || TreeError::BadPath(position.path.clone());
        let mut parent = None;
        for &id in &position.path {
            if self.node(id).ok_or_else(bad)?.parent != parent {
                return Err(bad());
            }
            parent = Some(id);
        }
        for &(parent, child) in &position.cursors {
            if self.node(child).ok_or(TreeError::NotFound(child))?.parent != parent {
                return Err(TreeError::BadParent { node: child, parent: parent.unwrap_or(child) });
            }
        }
        self.path = position.path.clone();
        self.cursors = position.cursors.iter().copied().collect();
        Ok(())
    }

    /// Where the path stands and the cursors, for a store.
    pub fn position(&self) -> Position {
        Position { path: self.path.clone(), cursors: self.cursors.iter().map(|(&p, &c)| (p, c)).collect() }
    }

    fn insert(&mut self, node: Node) {
        let id = node.id;
        match node.parent {
            Some(parent) => self.children[parent.0 as usize].push(id),
            None => self.roots.push(id),
        }
        self.children.push(Vec::new());
        self.nodes.push(node);
    }

    /// Adds `message` as the newest child of `parent` (a new root without one), off the
    /// path: the path and cursors do not move. Its id.
    pub fn add(&mut self, parent: Option<NodeId>, message: Message, usage: Option<Usage>) -> Result<NodeId, TreeError> {
        if let Some(parent) = parent {
            self.node(parent).ok_or(TreeError::NotFound(parent))?;
        }
        let id = NodeId(self.nodes.len() as u64);
        self.insert(Node { id, parent, message, usage });
        Ok(id)
    }

    /// Adds `messages` as a chain under the head (a new root when the path is empty) and
    /// moves the path down through them: a committed turn. The last message gets `usage`.
    /// The new nodes' ids, in order.
    pub fn append(&mut self, messages: Vec<Message>, usage: Option<Usage>) -> Vec<NodeId> {
        let count = messages.len();
        let mut added = Vec::with_capacity(count);
        for (i, message) in messages.into_iter().enumerate() {
            let usage = if i + 1 == count { usage } else { None };
            let id = NodeId(self.nodes.len() as u64);
            let parent = self.head();
            self.insert(Node { id, parent, message, usage });
            self.cursors.insert(parent, id);
            self.path.push(id);
            added.push(id);
        }
        added
    }

    /// The last node of the path.
    pub fn head(&self) -> Option<NodeId> {
        self.path.last().copied()
    }

    /// The active path, root first.
    pub fn path(&self) -> &[NodeId] {
        &self.path
    }

    /// A node.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(usize::try_from(id.0).ok()?)
    }

    /// A node's message.
    pub fn message(&self, id: NodeId) -> Option<&Message> {
        self.node(id).map(|node| &node.message)
    }

    /// Every node, oldest first.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// A node's children, oldest first (empty for an unknown id).
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        usize::try_from(id.0).ok().and_then(|i| self.children.get(i)).map_or(&[], Vec::as_slice)
    }

    /// The nodes that share `id`'s parent (the roots, for a root), itself included,
    /// oldest first: the alternatives a user moves between.
    pub fn siblings(&self, id: NodeId) -> Result<&[NodeId], TreeError> {
        match self.node(id).ok_or(TreeError::NotFound(id))?.parent {
            Some(parent) => Ok(self.children(parent)),
            None => Ok(&self.roots),
        }
    }

    /// The roots, oldest first.
    pub fn roots(&self) -> &[NodeId] {
        &self.roots
    }

    /// How many nodes the tree holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree holds no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The path from a root down to `id`.
    pub fn path_to(&self, id: NodeId) -> Result<Vec<NodeId>, TreeError> {
        let mut path = vec![id];
        let mut at = self.node(id).ok_or(TreeError::NotFound(id))?;
        while let Some(parent) = at.parent {
            path.push(parent);
            at = self.node(parent).ok_or(TreeError::NotFound(parent))?;
        }
        path.reverse();
        Ok(path)
    }

    /// The usage of every turn in the tree, on every branch.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for usage in self.nodes.iter().filter_map(|node| node.usage) {
            total += usage;
        }
        total
    }

    /// The messages of the active path, root first: the agent's history.
    pub fn messages(&self) -> Vec<Message> {
        self.path.iter().filter_map(|&id| self.message(id)).cloned().collect()
    }

    /// Moves the path to run through `id` and on down to a tip ([`Tree::extend`]); `None`
    /// clears the path (the next turn starts a new root).
    pub fn navigate(&mut self, id: Option<NodeId>) -> Result<(), TreeError> {
        let Some(id) = id else {
            self.path.clear();
            return Ok(());
        };
        self.path = self.path_to(id)?;
        self.remember_path();
        self.extend();
        Ok(())
    }

    /// Ends the path at `id` exactly (no extension): the node a regenerated reply hangs
    /// from.
    pub fn truncate_to(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.path = self.path_to(id)?;
        self.remember_path();
        Ok(())
    }

    /// Walks the path down from the head to a leaf, taking under each node the child its
    /// cursor names, else the newest. An empty path stays empty.
    pub fn extend(&mut self) {
        while let Some(head) = self.head() {
            let next = self.cursors.get(&Some(head)).copied().or_else(|| self.children(head).last().copied());
            let Some(next) = next else { break };
            self.cursors.insert(Some(head), next);
            self.path.push(next);
        }
    }

    /// Points every cursor along the path at the path's next node.
    fn remember_path(&mut self) {
        let mut parent = None;
        for &id in &self.path {
            self.cursors.insert(parent, id);
            parent = Some(id);
        }
    }
}

#[cfg(test)]
mod tests;
