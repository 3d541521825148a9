package n8nsetup

import (
	"encoding/json"
	"os"
	"sort"
	"testing"
)

// realShapes are the nodes of testdata/real: each one reproduces the type,
// typeVersion and parameters of a node that n8n itself wrote (its _source
// names the file and commit in n8n's repository, or the node description
// that sets the defaults a node without "resource" or "operation" runs).
type realShape struct {
	effect Effect
	op     string
}

var realShapes = map[string]map[string]realShape{
	"testdata/real/n8n-1x.json": {
		"Trigger manual":           {Internal, ""},
		"HTTP v1 GET by default":   {Read, "GET"},
		"HTTP v1 POST":             {Write, "POST"},
		"HTTP v3 GET":              {Read, "GET"},
		"HTTP v3 POST":             {Write, "POST"},
		"HTTP v4.2 GET with query": {Read, "GET"},
		// HubSpot 2.x without operation: contact/upsert (was unclassified).
		"HubSpot contact without operation": {Write, "upsert"},
		"HubSpot contact get":               {Read, "get"},
		"HubSpot contact delete":            {Write, "delete"},
		"HubSpot recently updated":          {Read, "getRecentlyCreatedUpdated"},
		"HubSpot search":                    {Read, "search"},
		// Salesforce with a resource and no operation: create (was unclassified).
		"Salesforce opportunity without operation": {Write, "opportunity/create"},
		"Salesforce opportunities":                 {Read, "opportunity/getAll"},
		"Salesforce opportunity upsert":            {Write, "opportunity/upsert"},
		"Salesforce opportunity note":              {Write, "opportunity/addNote"},
		"Salesforce opportunity summary":           {Read, "opportunity/getSummary"},
		"Pipedrive lead create":                    {Write, "lead/create"},
		// Pipedrive 1's product resource defaults to getAll (was unclassified).
		"Pipedrive v1 products without operation": {Read, "product/getAll"},
		// Gmail 1's default resource is draft: it creates a draft (was "send").
		"Gmail v1 draft without resource or operation": {Write, "create"},
		"Gmail v1 drafts":        {Read, "getAll"},
		"Gmail v1 message send":  {Write, "message/send"},
		"Gmail v1 messages":      {Read, "message/getAll"},
		"Gmail v2 send":          {Write, "send"},
		"Gmail v2 messages":      {Read, "getAll"},
		"Gmail v2 send and wait": {Write, "sendAndWait"},
		"Gmail v2 mark as read":  {Write, "markAsRead"},
		"Gmail v2 add labels":    {Write, "addLabels"},
		"Gmail v2 reply":         {Write, "reply"},
		// Gmail 2's label resource defaults to getAll (was "label/send").
		"Gmail v2 labels without operation": {Read, "label/getAll"},
		"Slack v1 post":                     {Write, "message/post"},
		"Slack v2 post without operation":   {Write, "post"},
		"Slack v2 channel history":          {Read, "channel/history"},
		// Slack's user resource defaults to info, a read (was "user/post").
		"Slack v2 user without operation": {Read, "user/info"},
		// Slack's channel resource defaults to create (was "channel/post").
		"Slack v2 channel without operation": {Write, "channel/create"},
		// Telegram's chat resource defaults to get (was "chat/sendMessage").
		"Telegram chat without operation": {Read, "chat/get"},
		"Telegram send message":           {Write, "sendMessage"},
		"Telegram media group":            {Write, "sendMediaGroup"},
		"Telegram delete message":         {Write, "deleteMessage"},
		// Listing a chat's administrators only asks (was a write).
		"Telegram administrators":              {Read, "chat/administrators"},
		"Telegram set title":                   {Write, "chat/setTitle"},
		"Postgres v1 execute query":            {Write, "executeQuery"},
		"Postgres v1 without operation":        {Write, "insert"},
		"Postgres v2 insert without operation": {Write, "insert"},
		"Postgres v2 select":                   {Read, "select"},
		"Postgres v2 delete table":             {Write, "deleteTable"},
		"Postgres v2 upsert":                   {Write, "upsert"},
		"MySQL v1 insert":                      {Write, "insert"},
		// Google Sheets defaults to sheet/read in every typeVersion (was unclassified).
		"Google Sheets v2 without operation":           {Read, "read"},
		"Google Sheets v2 append":                      {Write, "append"},
		"Google Sheets v4 without operation":           {Read, "read"},
		"Google Sheets v4 append or update":            {Write, "appendOrUpdate"},
		"Airtable v2 get":                              {Read, "record/get"},
		"Airtable v1 without operation":                {Read, "read"},
		"Airtable v1 append":                           {Write, "append"},
		"Notion v2 page without resource or operation": {Write, "create"},
		"Notion v2 database without operation":         {Read, "database/get"},
		"Stripe meter event":                           {Write, "meterEvent/create"},
		// Stripe's default resource is balance, its default operation get.
		"Stripe without resource or operation": {Read, "get"},
		"Stripe customer without operation":    {Read, "customer/get"},
		"Send Email v1":                        {Write, "send"},
		"Send Email v2 without operation":      {Write, "send"},
		"Code":                                 {Internal, ""},
		"Trigger webhook v1":                   {Internal, ""},
		"Set v1":                               {Internal, ""},
		"Set without typeVersion":              {Internal, ""},
		"Convert to file":                      {Internal, ""},
		"No operation":                         {Internal, ""},
		"Trigger cron":                         {Internal, ""},
		"Node n8n does not have":               {Unclassified, ""},
		"Jira issue get":                       {Unclassified, ""},
		"Zendesk ticket without operation":     {Unclassified, ""},
	},
	"testdata/real/n8n-2x.json": {
		"Trigger manual":           {Internal, ""},
		"HTTP v4.2 GET with query": {Read, "GET"},
		// Any method but GET, HEAD and OPTIONS is taken for a write, WebDAV's too.
		"HTTP v4.5 WebDAV PROPFIND": {Write, "PROPFIND"},
		"HTTP v4.5 WebDAV MOVE":     {Write, "MOVE"},
		// HubSpot 1's default resource is deal (2's is contact).
		"HubSpot v1 without resource or operation":          {Write, "create"},
		"HubSpot v2.2 without operation":                    {Write, "upsert"},
		"Salesforce 1.1 SOQL query":                         {Read, "search/query"},
		"Salesforce 1.1 lead without resource or operation": {Write, "create"},
		"Pipedrive v2 activity create":                      {Write, "activity/create"},
		// Pipedrive 2's product resource defaults to create (1's to getAll).
		"Pipedrive v2 product without operation":      {Write, "product/create"},
		"Gmail v2.2 thread without operation":         {Read, "thread/getAll"},
		"Gmail v2.2 draft without operation":          {Write, "draft/create"},
		"Slack v2.7 search":                           {Read, "search"},
		"Slack v2.7 post without operation":           {Write, "post"},
		"Slack v2.7 channel members":                  {Read, "channel/member"},
		"Slack v2.7 schedule message":                 {Write, "schedule"},
		"Slack v2.7 scheduled messages":               {Read, "getManyScheduled"},
		"Postgres v2.7 insert without operation":      {Write, "insert"},
		"Postgres v2.7 select":                        {Read, "select"},
		"MySQL v2.5 execute query":                    {Write, "executeQuery"},
		"Google Sheets v4.7 read all sheets":          {Read, "sheet/read"},
		"Google Sheets v4.7 without operation":        {Read, "read"},
		"Google Sheets v4.7 delete spreadsheet":       {Write, "spreadsheet/deleteSpreadsheet"},
		"Airtable v2.2 without resource or operation": {Read, "get"},
		"Airtable v2.2 delete record":                 {Write, "deleteRecord"},
		"Notion v3 page create":                       {Write, "page/create"},
		"Notion v3 data source without operation":     {Read, "dataSource/get"},
		"Notion v3 page markdown update":              {Write, "page/updateMarkdown"},
		"Telegram callback without operation":         {Write, "callback/answerQuery"},
		"Stripe charge without operation":             {Read, "charge/get"},
		"Send Email v2.1 without operation":           {Write, "send"},
		"Trigger chat":                                {Internal, ""},
		"AI Agent":                                    {Unclassified, ""},
		"Chat model":                                  {Unclassified, ""},
		"Community node":                              {Unclassified, ""},
		"Code v2":                                     {Internal, ""},
		"Set v3.4":                                    {Internal, ""},
		"Zendesk ticket get":                          {Unclassified, ""},
		// A typeVersion the audit does not know: its default is not guessed.
		"Slack v2.8 without operation":           {Unclassified, ""},
		"Google Sheets v4.8 without operation":   {Unclassified, ""},
		"Gmail without typeVersion or operation": {Unclassified, ""},
	},
}

func TestClassifyRealNodeShapesOfBothMajors(t *testing.T) {
	files := make([]string, 0, len(realShapes))
	for f := range realShapes {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		want := realShapes[file]
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var w struct {
			Source struct {
				Nodes map[string]string `json:"nodes"`
			} `json:"_source"`
			Nodes []map[string]any `json:"nodes"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seen := map[string]bool{}
		for _, n := range w.Nodes {
			name, _ := n["name"].(string)
			seen[name] = true
			if w.Source.Nodes[name] == "" {
				t.Errorf("%s: node %q does not say where its shape comes from", file, name)
			}
			c, ok := want[name]
			if !ok {
				t.Errorf("%s: node %q has no expected classification", file, name)
				continue
			}
			t.Run(file+"/"+name, func(t *testing.T) {
				got := Classify(n)
				if got.Effect != c.effect || got.Operation != c.op {
					t.Fatalf("Classify(%s %v %v) = %+v, want %s %q", n["type"], n["typeVersion"], n["parameters"], got, c.effect, c.op)
				}
				if got.Effect == Unclassified && got.Why == "" {
					t.Fatalf("unclassified without saying why")
				}
			})
		}
		for name := range want {
			if !seen[name] {
				t.Errorf("%s has no node %q", file, name)
			}
		}
	}
}
