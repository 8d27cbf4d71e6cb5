package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func TestID(t *testing.T) {
	now := time.Now()
	a, b := store.NewID(now), store.NewID(now)
	assert.Equal(t, -1, a.Compare(b), "ids made in one process increase, even within a millisecond")
	back := store.NewID(now.Add(-time.Hour))
	assert.Equal(t, -1, b.Compare(back), "ids increase when the clock steps back")
	assert.Equal(t, now.UnixMilli(), a.Time().UnixMilli())

	parsed, err := store.ParseID(a.String())
	require.NoError(t, err)
	assert.Equal(t, a, parsed)
	for _, bad := range []string{"", "xyz", a.String()[:23], a.String() + "0", "zz" + a.String()[2:]} {
		_, err := store.ParseID(bad)
		assert.Equal(t, store.EINVALID, store.ErrorCode(err), "%q", bad)
	}
}

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code, msg string
	}{
		{nil, "", ""},
		{store.Errorf(store.ENOTFOUND, "user %s not found", "x"), store.ENOTFOUND, "user x not found"},
		{fmt.Errorf("wrapped: %w", store.Errorf(store.ECONFLICT, "taken")), store.ECONFLICT, "taken"},
		{errors.New("disk on fire"), store.EINTERNAL, "internal error"},
	} {
		assert.Equal(t, tc.code, store.ErrorCode(tc.err))
		assert.Equal(t, tc.msg, store.ErrorMessage(tc.err))
	}
}

func TestNormalizeHandle(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"alice", "alice", true},
		{"Alice_99", "alice_99", true},
		{"abc", "abc", true},
		{"ab", "", false},
		{"a23456789012345678901234567890", "a23456789012345678901234567890", true},
		{"a234567890123456789012345678901", "", false},
		{"al ice", "", false},
		{"al-ice", "", false},
		{"ålice", "", false},
	} {
		got, err := store.NormalizeHandle(tc.in)
		if tc.ok {
			assert.NoError(t, err, tc.in)
			assert.Equal(t, tc.want, got)
		} else {
			assert.Equal(t, store.EINVALID, store.ErrorCode(err), tc.in)
		}
	}
}

func TestPageSize(t *testing.T) {
	n := func(i int) *int { return &i }
	for _, tc := range []struct {
		first *int
		want  int
		ok    bool
	}{
		{nil, store.DefaultPageSize, true},
		{n(0), 0, true},
		{n(100), 100, true},
		{n(101), 0, false},
		{n(-1), 0, false},
	} {
		got, err := store.PageSize("last", tc.first)
		if tc.ok {
			assert.NoError(t, err)
			assert.Equal(t, tc.want, got)
		} else {
			assert.Equal(t, store.EINVALID, store.ErrorCode(err))
		}
	}
}

func TestParseMentions(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"hi @alice and @Bob_99!", []string{"alice", "bob_99"}},
		{"@alice @ALICE @alice", []string{"alice"}},
		{"mail me at me@example.com", nil},
		{"@al is too short, @" + strings.Repeat("x", 31) + " too long", nil},
		{"@" + strings.Repeat("x", 30) + ".", []string{strings.Repeat("x", 30)}},
		{"(@carol), @dave's, @@erin", []string{"carol", "dave", "erin"}},
		{"@\u212Aelvin is not ASCII", nil},
		{"trailing @", nil},
		{"", nil},
	} {
		assert.Equal(t, tc.want, store.ParseMentions(tc.text), "%q", tc.text)
	}
}

func TestSearchTerms(t *testing.T) {
	assert.Equal(t, "zoe aaoe", store.FoldSearch("ZOË ÅÄöé"), "case and accents folded")
	assert.Equal(t, []string{"ann_b", "anne", "marie", "o", "brien", "b2"}, store.SearchTerms("ann_b", "Anne-Marie O’Brien b2 ANNE"),
		"the handle, then each word once")
	assert.Equal(t, []string{"bob"}, store.SearchTerms("bob", "🎉 🎉"), "a name without words adds none")
	assert.Empty(t, store.SearchWords(" -.- "), "a query of no words is refused")
}
