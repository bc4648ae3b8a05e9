// The collection layer (collections.h).
#include "server/collections.h"

namespace pmindex::server {

Status WrongTypeError() { return Status::WrongKind(kWrongType); }

bool IsWrongType(const Status& s) { return s.code() == Status::Code::kWrongKind; }

std::string_view KindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kNone:
      return "none";
    case KeyKind::kString:
      return "string";
    case KeyKind::kHash:
      return "hash";
    case KeyKind::kList:
      return "list";
    case KeyKind::kSet:
      return "set";
    case KeyKind::kZset:
      return "zset";
  }
  return "none";
}

KeyKind KindOf(CollectionType type) {
  switch (type) {
    case CollectionType::kHash:
      return KeyKind::kHash;
    case CollectionType::kList:
      return KeyKind::kList;
    case CollectionType::kSet:
      return KeyKind::kSet;
    case CollectionType::kZset:
      return KeyKind::kZset;
  }
  return KeyKind::kNone;
}

std::string_view EncodingName(CollectionType type) {
  switch (type) {
    case CollectionType::kHash:
    case CollectionType::kSet:
      return "hashtable";
    case CollectionType::kList:
      return "quicklist";
    case CollectionType::kZset:
      return "skiplist";
  }
  return "hashtable";
}

// Interface only so far: the implementation follows.
Result<Collection> Collection::Find(TxnScope&, int, std::string_view, CollectionType) {
  return Status::NotSupported("collections are not implemented yet");
}
Result<Collection> Collection::Create(TxnScope&, int, std::string_view, CollectionType) {
  return Status::NotSupported("collections are not implemented yet");
}
Result<Collection> Collection::FindOrCreate(TxnScope&, int, std::string_view, CollectionType) {
  return Status::NotSupported("collections are not implemented yet");
}


size_t Collection::max_member_bytes() const { return 0; }
size_t Collection::max_value_bytes() const { return 0; }
Result<std::string> Collection::Get(char, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
Status Collection::Put(char, std::string_view, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
Result<bool> Collection::Remove(char, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
size_t Collection::Range(char, std::string_view, std::optional<std::string_view>, size_t,
                         std::vector<std::pair<std::string, std::string>>*) {
  return 0;
}
Status Collection::Save() { return Status::NotSupported("collections are not implemented yet"); }
Status Collection::Delete() { return Status::NotSupported("collections are not implemented yet"); }

Result<KeyKind> KindOfKey(TxnScope&, int, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
KeyKind KindOfStored(std::string_view, int64_t) { return KeyKind::kNone; }
Result<bool> DeleteKey(TxnScope&, int, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
Result<bool> CopyKey(TxnScope&, int, std::string_view, int, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
Result<bool> MoveKey(TxnScope&, int, std::string_view, std::string_view) {
  return Status::NotSupported("collections are not implemented yet");
}
CollectionReport VerifyCollections(Databases&, size_t) { return {}; }

}  // namespace pmindex::server
