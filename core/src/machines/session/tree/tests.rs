use proptest::prelude::*;

use super::*;

fn user(text: &str) -> Message {
    Message::user(text)
}

fn reply(text: &str) -> Message {
    Message::assistant(text)
}

fn texts(tree: &Tree) -> Vec<String> {
    tree.messages().iter().map(Message::text).collect()
}

/// u0 ─ a1 ─ u2 ─ a3         (first turn, then a second)
///    └ a4                   (the first reply regenerated)
fn branched() -> Tree {
    let mut tree = Tree::new();
    tree.append(vec![user("hi"), reply("hello")], None);
    tree.append(vec![user("how are you"), reply("fine")], None);
    tree.truncate_to(NodeId(0)).expect("u0");
    tree.append(vec![reply("hey")], None);
    tree
}

#[test]
fn a_turn_appends_under_the_head_and_moves_the_path() {
    let mut tree = Tree::new();
    assert_eq!(tree.head(), None);
    let ids = tree.append(vec![user("hi"), reply("hello")], Some(Usage { input_tokens: 3, ..Usage::default() }));
    assert_eq!(ids, [NodeId(0), NodeId(1)]);
    assert_eq!(tree.head(), Some(NodeId(1)));
    assert_eq!(tree.node(NodeId(1)).and_then(|n| n.parent), Some(NodeId(0)));
    assert_eq!(tree.node(NodeId(0)).and_then(|n| n.usage), None, "the usage goes on the turn's last node");
    assert_eq!(tree.usage().input_tokens, 3);
    assert_eq!(texts(&tree), ["hi", "hello"]);
}

#[test]
fn regenerating_adds_a_sibling_and_navigation_moves_between_them() {
    let mut tree = branched();
    assert_eq!(texts(&tree), ["hi", "hey"]);
    assert_eq!(tree.siblings(NodeId(4)), Ok(&[NodeId(1), NodeId(4)][..]));
    // Back to the first reply: the path extends down its branch to the tip.
    tree.navigate(Some(NodeId(1))).expect("a1");
    assert_eq!(tree.path(), [NodeId(0), NodeId(1), NodeId(2), NodeId(3)]);
    // Navigating to the user node follows the cursor: the reply last active under it.
    tree.navigate(Some(NodeId(0))).expect("u0");
    assert_eq!(tree.path(), [NodeId(0), NodeId(1), NodeId(2), NodeId(3)]);
    tree.navigate(Some(NodeId(4))).expect("a4");
    tree.navigate(Some(NodeId(0))).expect("u0");
    assert_eq!(tree.path(), [NodeId(0), NodeId(4)]);
    assert_eq!(tree.len(), 5, "navigation never deletes");
}

#[test]
fn without_a_cursor_extend_takes_the_newest_child() {
    let mut tree = Tree::new();
    let root = tree.add(None, user("q"), None).expect("root");
    tree.add(Some(root), reply("old"), None).expect("old");
    tree.add(Some(root), reply("new"), None).expect("new");
    tree.navigate(Some(root)).expect("root");
    assert_eq!(texts(&tree), ["q", "new"]);
}

#[test]
fn an_empty_path_starts_a_new_root() {
    let mut tree = branched();
    tree.navigate(None).expect("cleared");
    assert!(tree.path().is_empty());
    tree.extend();
    assert!(tree.path().is_empty(), "an empty path stays empty");
    let ids = tree.append(vec![user("another topic"), reply("sure")], None);
    assert_eq!(tree.roots(), [NodeId(0), ids[0]]);
    assert_eq!(tree.siblings(ids[0]), Ok(&[NodeId(0), ids[0]][..]));
    assert_eq!(tree.path_to(ids[1]), Ok(vec![ids[0], ids[1]]));
}

#[test]
fn unknown_nodes_are_typed_errors_and_change_nothing() {
    let mut tree = branched();
    let before = tree.clone();
    assert_eq!(tree.navigate(Some(NodeId(99))), Err(TreeError::NotFound(NodeId(99))));
    assert_eq!(tree.add(Some(NodeId(99)), user("x"), None), Err(TreeError::NotFound(NodeId(99))));
    assert_eq!(tree.siblings(NodeId(99)), Err(TreeError::NotFound(NodeId(99))));
    assert_eq!(tree.children(NodeId(99)), &[] as &[NodeId]);
    assert_eq!(tree, before);
}

#[test]
fn a_tree_and_its_position_round_trip_through_their_stored_form() {
    let mut tree = branched();
    tree.navigate(Some(NodeId(2))).expect("u2");
    let json: Vec<String> = tree.nodes().iter().map(|n| serde_json::to_string(n).expect("json")).collect();
    let nodes = json.iter().map(|line| serde_json::from_str::<Node>(line).expect("node"));
    let mut loaded = Tree::from_nodes(nodes).expect("a tree");
    let position: Position =
        serde_json::from_str(&serde_json::to_string(&tree.position()).expect("json")).expect("back");
    loaded.restore(&position).expect("restored");
    assert_eq!(loaded, tree);
}

#[test]
fn stored_nodes_that_are_not_a_tree_are_refused() {
    let node =
        |id, parent: Option<u64>| Node { id: NodeId(id), parent: parent.map(NodeId), message: user("x"), usage: None };
    assert_eq!(
        Tree::from_nodes([node(0, None), node(2, Some(0))]),
        Err(TreeError::OutOfOrder { expected: NodeId(1), found: NodeId(2) })
    );
    assert_eq!(
        Tree::from_nodes([node(0, None), node(1, Some(1))]),
        Err(TreeError::BadParent { node: NodeId(1), parent: NodeId(1) })
    );
    let mut tree = Tree::from_nodes([node(0, None), node(1, Some(0)), node(2, None)]).expect("a tree");
    let skips = Position { path: vec![NodeId(1)], cursors: vec![] };
    assert_eq!(tree.restore(&skips), Err(TreeError::BadPath(vec![NodeId(1)])));
    let crossed = Position { path: vec![], cursors: vec![(Some(NodeId(2)), NodeId(1))] };
    assert!(tree.restore(&crossed).is_err());
    assert!(tree.path().is_empty(), "a refused position changes nothing");
}

/// What a tree must always be, whatever was done to it.
fn check(tree: &Tree) {
    for (i, node) in tree.nodes().iter().enumerate() {
        assert_eq!(node.id, NodeId(i as u64));
        match node.parent {
            Some(parent) => {
                assert!(parent < node.id);
                assert!(tree.children(parent).contains(&node.id));
            }
            None => assert!(tree.roots().contains(&node.id)),
        }
    }
    let mut parent = None;
    for &id in tree.path() {
        assert_eq!(tree.node(id).expect("on the path").parent, parent, "the path follows parent links");
        parent = Some(id);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Turn(usize),
    Navigate(Option<u64>),
    Truncate(u64),
    Add(Option<u64>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..4).prop_map(Op::Turn),
        proptest::option::of(0u64..40).prop_map(Op::Navigate),
        (0u64..40).prop_map(Op::Truncate),
        proptest::option::of(0u64..40).prop_map(Op::Add),
    ]
}

proptest! {
    /// Any sequence of operations keeps the tree a tree, never loses a node, and leaves
    /// the path a path; navigation extends to a leaf; the stored form gives the same tree.
    #[test]
    fn operations_keep_the_tree_whole(ops in proptest::collection::vec(op(), 0..60)) {
        let mut tree = Tree::new();
        for op in ops {
            let before = tree.len();
            let known = |id: u64, tree: &Tree| (id as usize) < tree.len();
            match op {
                Op::Turn(n) => {
                    let ids = tree.append((0..n).map(|i| user(&i.to_string())).collect(), None);
                    prop_assert_eq!(tree.head(), ids.last().copied());
                }
                Op::Navigate(id) => {
                    let ok = id.is_none_or(|id| known(id, &tree));
                    prop_assert_eq!(tree.navigate(id.map(NodeId)).is_ok(), ok);
                    if let (true, Some(head)) = (ok, tree.head()) {
                        prop_assert!(tree.children(head).is_empty(), "extended to a leaf");
                    }
                }
                Op::Truncate(id) => {
                    let ok = known(id, &tree);
                    prop_assert_eq!(tree.truncate_to(NodeId(id)).is_ok(), ok);
                }
                Op::Add(parent) => {
                    let ok = parent.is_none_or(|p| known(p, &tree));
                    prop_assert_eq!(tree.add(parent.map(NodeId), reply("alt"), None).is_ok(), ok);
                }
            }
            prop_assert!(tree.len() >= before);
            check(&tree);
            let mut restored = Tree::from_nodes(tree.nodes().to_vec()).expect("a tree");
            restored.restore(&tree.position()).expect("a position");
            prop_assert_eq!(&restored, &tree);
        }
    }
}
