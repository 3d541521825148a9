// Package slack speaks Slack's wire protocol for notify: the Web API calls
// (slack-go; chat.postMessage, chat.update, conversations.history,
// chat.postEphemeral, users.lookupByEmail, usergroups.users.list) with
// their timeouts and error classes, Block Kit rendering of a notification,
// the signed interactivity endpoint (signature, five-minute window, replay
// marks kept through notify's outbox) and Socket Mode. It owns mrkdwn
// escaping (package slack/mrkdwn, which notify's reply texts use too):
// every text from a payload, a person or n8n is escaped where it is put
// into mrkdwn.
//
// What it must never do: decide anything about a notification (notify's
// transitions do), or take a click whose signature, age or first use it
// has not checked.
package slack
