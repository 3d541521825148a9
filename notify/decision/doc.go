// Package decision carries out the decisions people take on the guard's
// notifications: a press of a Slack message's buttons (a Click, checked
// and decoded by the slack package, HTTP or Socket Mode) and an
// operator's decision on a failed execution in the console
// (DecideFailure). For each it finds the notification the button acts on
// (an escalation's buttons act on the one it escalates), checks that the
// person may decide it (notify's routes: owner, resolvers, escalation
// steps, approvers), decides what the click asks for from the
// notification as it stands (click.go: a stale button changes nothing),
// carries out the side effect in the keystore or in n8n (resolve a key or
// every open key of a group, approve or reject, allow a re-run at the
// gate, retry an execution), records the decision on the notification
// through notify.Service, writes it in the keys' history and the audit,
// and answers the person alone (an ephemeral message) when nothing
// changed. Two decisions about one notification take turns.
//
// It imports notify (the records, the outbox, the routes and the pure
// transitions behind notify.Service's Record* methods), keystore and
// rerun (the keys decided), errs and slack/mrkdwn (the words of an
// answer). notify never imports it.
//
// What this package must never do: change a notification's record but
// through notify.Service (the life cycle is notify's transitions.go);
// decide anything for a person the routes do not name, or on a button
// rendered for another attempt or version; call Slack but through
// notify.Service.CallSlack (which keeps Slack's pause); import a database
// driver, net/http or an SDK; carry out a click on the request's
// goroutine (Slack waits three seconds at most).
package decision
